package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/vstream-gateway/vstream-gateway/lease"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// MoveTables bridges run on one replica (DESIGN §4.1 rule 5, §7). Every
// replica's Mover finds a new MoveTables journal and hands it to its
// bridger; without a lease each would capture every subscriber behind the
// cutover into the same spool log at once. The replica holding the
// cutover's lease bridges, its spool appends and subscriber writes fenced
// by the lease; the others wait for the lease and, when they get it, find
// the cutover marked bridged and stop. A holder that dies mid-way leaves
// the lease to expire and the next replica bridges again (a bridge
// restarts from scratch and skips subscribers already bridged).

const movesBridgedNS = "movetables-bridged"

func moveBridgeLease(j *reshard.Journal) string {
	return "movetables-bridges/" + j.Keyspace + "/" + j.Key
}

// moveBridged reports whether some replica finished bridging j.
func (b *Bridger) moveBridged(ctx context.Context, j *reshard.Journal) (bool, error) {
	_, err := b.st.Get(ctx, movesBridgedNS, j.Keyspace+"/"+j.Key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Moved bridges, in the background until Close and under the cutover's
// lease, the named subscribers of the streams that followed MoveTables
// journal j: the journal read that found it must not wait for the
// captures.
func (b *Bridger) Moved(defs []*streams.Definition, j *reshard.Journal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.movedLeased(b.ctx, defs, j)
	}()
}

func (b *Bridger) movedLeased(ctx context.Context, defs []*streams.Definition, j *reshard.Journal) {
	if done, _ := b.moveBridged(ctx, j); done {
		return
	}
	log := b.log.With("journal", j.Key, "keyspace", j.Keyspace)
	r := lease.New(b.st, moveBridgeLease(j), b.opts.holder, b.opts.moveLease,
		lease.WithKind(metrics.LeaseMoveBridges), lease.WithLogger(log))
	err := r.Run(ctx, func(ctx context.Context, l store.Lease) error {
		done, err := b.moveBridged(ctx, j)
		if err != nil || done {
			return err // another replica bridged while this one waited
		}
		b.All(ctx, defs, j, &l)
		if ctx.Err() != nil {
			return ctx.Err() // lost the lease or closing: the next holder bridges again
		}
		return b.st.PutFenced(ctx, movesBridgedNS, j.Keyspace+"/"+j.Key,
			[]byte(time.Now().UTC().Format(time.RFC3339Nano)), l.Name, l.Token)
	})
	if err != nil && b.ctx.Err() == nil {
		log.Warn("MoveTables bridges did not finish on this replica", "err", err)
	}
}
