package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/vstream-gateway/vstream-gateway/lease"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// MoveTables bridges run on one replica (DESIGN §4.1 rule 5, §7). Every
// replica's Mover finds a new MoveTables journal and hands it to the hub;
// without a lease each would capture every subscriber behind the cutover
// into the same spool log at once. The replica holding the cutover's lease
// bridges, its spool appends and subscriber writes fenced by the lease;
// the others wait for the lease and, when they get it, find the cutover
// marked bridged and stop. A holder that dies mid-way leaves the lease to
// expire and the next replica bridges again (a bridge restarts from
// scratch and skips subscribers already bridged).

// WithHolder names this replica in the leases the hub takes (the server's
// replica id). Default: a random name.
func WithHolder(id string) Option { return func(h *Hub) { h.holder = id } }

// WithMoveBridgeLease sets the time-to-live of a MoveTables cutover's
// bridging lease (default 10 s): the longest its bridges stay undone after
// the holding replica died.
func WithMoveBridgeLease(ttl time.Duration) Option { return func(h *Hub) { h.moveLeaseTTL = ttl } }

func randomHolder() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "hub/" + hex.EncodeToString(b)
}

const movesBridgedNS = "movetables-bridged"

func moveBridgeLease(j *reshard.Journal) string {
	return "movetables-bridges/" + j.Keyspace + "/" + j.Key
}

// moveBridged reports whether some replica finished bridging j.
func (h *Hub) moveBridged(ctx context.Context, j *reshard.Journal) (bool, error) {
	_, err := h.st.Get(ctx, movesBridgedNS, j.Keyspace+"/"+j.Key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// BridgeMoved bridges, in the background until the hub closes and under
// the cutover's lease, the named subscribers of the streams that followed
// MoveTables journal j: the journal read that found it must not wait for
// the captures.
func (h *Hub) BridgeMoved(defs []*streams.Definition, j *reshard.Journal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.bridgeMovedLeased(h.ctx, defs, j)
	}()
}

func (h *Hub) bridgeMovedLeased(ctx context.Context, defs []*streams.Definition, j *reshard.Journal) {
	if done, _ := h.moveBridged(ctx, j); done {
		return
	}
	log := h.log.With("journal", j.Key, "keyspace", j.Keyspace)
	r := lease.New(h.st, moveBridgeLease(j), h.holder, h.moveLeaseTTL,
		lease.WithKind(metrics.LeaseMoveBridges), lease.WithLogger(log))
	err := r.Run(ctx, func(ctx context.Context, l store.Lease) error {
		done, err := h.moveBridged(ctx, j)
		if err != nil || done {
			return err // another replica bridged while this one waited
		}
		h.bridgeAll(ctx, defs, j, &l)
		if ctx.Err() != nil {
			return ctx.Err() // lost the lease or closing: the next holder bridges again
		}
		return h.st.PutFenced(ctx, movesBridgedNS, j.Keyspace+"/"+j.Key,
			[]byte(time.Now().UTC().Format(time.RFC3339Nano)), l.Name, l.Token)
	})
	if err != nil && h.ctx.Err() == nil {
		log.Warn("MoveTables bridges did not finish on this replica", "err", err)
	}
}
