package hub

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// A tail is the one upstream VStream of a stream definition in this process
// (DESIGN §5). It reads the stream from the live end into a ring, and every
// reader whose position the ring covers follows it there: a reader costs
// the database nothing, and its transactions are encoded once for all.
// Readers further behind catch up on a VStream of their own and join the
// tail once they reach the ring (see follow.go).
type tail struct {
	h    *Hub
	def  *streams.Definition
	spec source.Spec

	ready  chan struct{} // closed once ring is set (or the start failed)
	ring   *ring
	cancel context.CancelFunc
	done   chan struct{}

	users    atomic.Int32
	lastUsed atomic.Int64 // unix nanos of the last release
	idleStop atomic.Bool  // the tail stopped for want of readers
}

// TailOptions bound each tail's history ring and how long a tail without
// readers keeps running (so that pollers and reconnecting browsers find it).
type TailOptions struct {
	RingBytes   int
	RingEntries int
	Idle        time.Duration
	// StartWait bounds how long a reader waits for a starting tail before
	// it reads on a VStream of its own.
	StartWait time.Duration
}

// DefaultTailOptions are the defaults of --ring-bytes, --ring-entries and
// --tail-idle.
var DefaultTailOptions = TailOptions{RingBytes: 64 << 20, RingEntries: 100_000, Idle: 2 * time.Minute, StartWait: 10 * time.Second}

// acquireTail returns the running tail of def, starting one if needed, with
// one more user counted; nil when tails are off. release must follow.
func (h *Hub) acquireTail(def *streams.Definition) *tail {
	if h.tailOpts.RingEntries <= 0 {
		return nil
	}
	if _, ok := h.src.(currentPositioner); !ok {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	t := h.tails[def.Name]
	if t != nil && !sameDefinition(t.def, def) {
		// The stream was defined again: its old tail reads the old filter.
		delete(h.tails, def.Name)
		t.cancel()
		t = nil
	}
	if t == nil {
		t = h.startTail(def)
		h.tails[def.Name] = t
	}
	t.users.Add(1)
	return t
}

func (t *tail) release() {
	t.lastUsed.Store(time.Now().UnixNano())
	t.users.Add(-1)
}

func (h *Hub) startTail(def *streams.Definition) *tail {
	ctx, cancel := context.WithCancel(h.ctx)
	t := &tail{
		h: h, def: def,
		spec:   source.Spec{Name: def.Name, Keyspace: def.Keyspace, Rules: def.VitessRules()},
		ready:  make(chan struct{}),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	t.lastUsed.Store(time.Now().UnixNano())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(t.done)
		t.run(ctx)
	}()
	return t
}

// wait returns the tail's ring once it has its starting position, or nil
// when it failed to start; errTailSlow when it did not within the
// StartWait.
func (t *tail) wait(ctx context.Context) (*ring, error) {
	timer := time.NewTimer(t.h.tailOpts.StartWait)
	defer timer.Stop()
	select {
	case <-t.ready:
		return t.ring, nil
	case <-timer.C:
		return nil, fmt.Errorf("%w: no position from the stream's tail after %v", source.ErrVtgateTimeout, t.h.tailOpts.StartWait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tailHead returns the head position of def's tail, starting the tail if
// needed, or nil when there is none. A tail that is running but has no
// position yet after the StartWait is an error: vtgate (or a shard's
// tablet) is away, and resolving "now" on a VStream of the reader's own
// would wait for the same vtgate, so the reader is told to come back
// (DESIGN §11 rule 4) rather than kept waiting twice as long.
func (h *Hub) tailHead(ctx context.Context, def *streams.Definition) (*binlogdatapb.VGtid, error) {
	t := h.acquireTail(def)
	if t == nil {
		return nil, nil
	}
	defer t.release()
	r, err := t.wait(ctx)
	if r == nil {
		return nil, err
	}
	head, _ := r.head()
	return head, nil
}

// ringCovers reports whether def's running tail can serve a reader at pos
// from its ring.
func (h *Hub) ringCovers(def *streams.Definition, pos *binlogdatapb.VGtid) bool {
	if !joinable(pos) {
		return false
	}
	h.mu.Lock()
	t := h.tails[def.Name]
	h.mu.Unlock()
	if t == nil || !sameDefinition(t.def, def) {
		return false
	}
	r := t.current()
	if r == nil {
		return false
	}
	_, ok := r.joinAt(pos)
	return ok
}

// current returns the ring if the tail has started, without waiting.
func (t *tail) current() *ring {
	select {
	case <-t.ready:
		return t.ring
	default:
		return nil
	}
}

func (t *tail) run(ctx context.Context) {
	log := t.h.log.With("stream", t.def.Name)
	r := t.h.up.Open(ctx, t.def, source.NowPosition(t.def.Keyspace))
	defer r.Close()
	defer t.forget()
	var ring *ring
	defer func() {
		if ring == nil {
			close(t.ready)
		}
	}()
	go t.watchIdle(ctx)
	journals := map[int64]bool{}
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			var dropped *upstream.TablesDroppedError
			ended := errors.As(err, &dropped)
			if ring != nil {
				if ended {
					// The stream itself ended (on_gap fail, DESIGN §4.1
					// rule 9): every follower ends with it once it has
					// read up to the DROP, as a reader of its own would.
					// Reading on privately past the DROP would be silence.
					ring.close(err)
				} else {
					ring.close(errRingClosed)
				}
			}
			if ended {
				log.Warn("stream tail ended: the stream's tables were dropped; its readers end with it", "err", err)
				return
			}
			if t.idleStop.Load() {
				log.Info("stream tail stopped: no readers", "idle", t.h.tailOpts.Idle)
			} else if ctx.Err() == nil {
				log.Warn("stream tail stopped; its readers continue on VStreams of their own", "err", err)
			}
			return
		}
		if ring == nil {
			// The first position vtgate sends is where the tail starts.
			if !joinable(txn.VGtid) {
				continue
			}
			ring = newRing(t.h.tailOpts.RingBytes, t.h.tailOpts.RingEntries, txn.VGtid)
			ring.mint = func(v *binlogdatapb.VGtid) (string, error) { return t.h.Token(context.Background(), t.def, v) }
			t.ring = ring
			close(t.ready)
			log.Info("stream tail started", "position", txn.VGtid.String())
			metrics.TailStarted(t.def.Name)
			continue
		}
		before, _ := ring.head()
		after := txn.VGtid
		var moved []string
		if !txn.Heartbeat {
			moved = position.Of(before).Moved(position.Of(txn.VGtid))
		}
		if j := txn.Journal; j != nil && j.MigrationType == binlogdatapb.MigrationType_SHARDS && txn.JournalDone && !journals[j.Id] {
			// vtgate continues on the journal's shards from its positions:
			// so does the tail's position, and with it every follower's.
			journals[j.Id] = true
			after = position.Of(after).ApplyJournal(j).VGtid()
		}
		ring.append(txn, after, moved)
		entries, bytes := ring.stats()
		metrics.TailRing(t.def.Name, entries, bytes)
	}
}

// watchIdle stops the tail once it has had no users for the idle time.
func (t *tail) watchIdle(ctx context.Context) {
	tick := time.NewTicker(max(t.h.tailOpts.Idle/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if t.idle() {
				t.idleStop.Store(true)
				t.cancel()
				return
			}
		}
	}
}

// idle reports whether the tail has had no users for the idle time, and if
// so removes it from the hub so that no new user can find it.
func (t *tail) idle() bool {
	if t.users.Load() > 0 || time.Since(time.Unix(0, t.lastUsed.Load())) < t.h.tailOpts.Idle {
		return false
	}
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.users.Load() > 0 {
		return false
	}
	if h.tails[t.def.Name] == t {
		delete(h.tails, t.def.Name)
	}
	return true
}

// forget removes a stopped tail from the hub.
func (t *tail) forget() {
	h := t.h
	h.mu.Lock()
	if h.tails[t.def.Name] == t {
		delete(h.tails, t.def.Name)
	}
	h.mu.Unlock()
	if t.ring != nil {
		metrics.TailStopped(t.def.Name)
	}
}
