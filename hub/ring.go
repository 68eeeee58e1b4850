package hub

import (
	"context"
	"errors"
	"sort"
	"sync"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// The history ring of a tail (DESIGN §5): the most recent transactions of
// the stream's one upstream VStream, each with the tail's position before
// and after it. A reader whose cursor lies inside the ring is served from
// memory; the ring is bounded in bytes and in entries, and the oldest
// entries go first.

// errRingClosed ends every follower of a tail whose upstream stopped.
var errRingClosed = errors.New("hub: tail stopped")

// errFellOff tells a follower that the entries it still needed were evicted:
// it was slower than the ring is long.
var errFellOff = errors.New("hub: reader fell behind the tail's history")

// ringEntry is one transaction of the tail.
type ringEntry struct {
	seq uint64
	txn *source.Txn
	// before and after are the tail's positions around the transaction.
	// before already has every journal before it applied, so that a shard
	// that appears at a reshard has its starting position there.
	before, after *binlogdatapb.VGtid
	// moved lists the shards whose position the transaction advances:
	// one for a transaction, none for heartbeats and control events.
	moved  []string
	weight int
	// start is the seq of the first piece of the chunked transaction the
	// entry is a piece of (DESIGN §3.1), its own seq otherwise: a reader
	// joins only where a transaction starts.
	start uint64

	tokOnce sync.Once
	tok     string
	tokErr  error
	// shared is the delivery of every follower in step with the tail (its
	// position the tail's after the entry), made with the token: they
	// share its transaction and cursor rather than copy them each.
	shared *Delivery
}

// token is the cursor token of the tail's position after the entry, made
// once for every reader whose position equals the tail's.
func (e *ringEntry) token(mint func(*binlogdatapb.VGtid) (string, error)) (string, error) {
	e.tokOnce.Do(func() { e.tok, e.tokErr = mint(e.after) })
	return e.tok, e.tokErr
}

// ring is safe for concurrent use: one writer (the tail) and any number of
// readers.
type ring struct {
	maxBytes, maxCount int

	mu      sync.RWMutex
	entries []*ringEntry
	first   uint64 // seq of entries[0]; next seq is first+len(entries)
	bytes   int
	pos     *binlogdatapb.VGtid // the tail's position after the newest entry
	start   *binlogdatapb.VGtid // before of entries[0] (pos when empty)
	// segments are the seqs of entries whose before names other shards
	// than the entry before it (a reshard passed): positions grow within a
	// segment, not across one.
	segments []uint64
	// mint makes the cursor token of a position, when set (by the tail):
	// an entry's token is then made once, by the tail, before any
	// follower needs it.
	mint      func(*binlogdatapb.VGtid) (string, error)
	wake      chan struct{} // closed and replaced at every append and at close
	parkedSet               // parked readers, woken at every append and at close (wake.go)
	err       error         // set when the tail stopped
	// open is set while the newest entry is a Partial piece: the tail is
	// inside a chunked transaction whose first piece is openStart.
	open      bool
	openStart uint64
}

func newRing(maxBytes, maxCount int, start *binlogdatapb.VGtid) *ring {
	return &ring{maxBytes: maxBytes, maxCount: maxCount, pos: start, start: start, wake: make(chan struct{})}
}

// append adds the tail's next transaction and evicts what no longer fits.
// after is the tail's position after it, moved the shards it advances.
func (r *ring) append(txn *source.Txn, after *binlogdatapb.VGtid, moved []string) {
	e := &ringEntry{txn: txn, after: after, moved: moved, weight: txn.Weight()}
	if r.mint != nil && !txn.Partial && !txn.Heartbeat {
		// Made before the entry is seen: the followers woken for it would
		// otherwise queue on the first one's making of it.
		tok, err := r.mint(after)
		e.tokOnce.Do(func() { e.tok, e.tokErr = tok, err })
		if err == nil && tok != "" {
			shared := txn
			if after != txn.VGtid {
				c := *txn
				c.VGtid = after
				shared = &c
			}
			e.shared = &Delivery{Txn: shared, Cursor: tok}
		}
	}
	r.mu.Lock()
	e.seq, e.before = r.first+uint64(len(r.entries)), r.pos
	e.start = e.seq
	if txn.Continued && r.open {
		e.start = r.openStart
	}
	r.open, r.openStart = txn.Partial, e.start
	if len(r.entries) > 0 && !position.Of(e.before).SameShards(position.Of(r.entries[len(r.entries)-1].before)) {
		r.segments = append(r.segments, e.seq)
	}
	r.entries = append(r.entries, e)
	r.bytes += e.weight
	r.pos = after
	// Keep at least the newest entry, whatever its size: a reader at the
	// head must be able to get it.
	drop := 0
	for len(r.entries)-drop > 1 && (r.bytes > r.maxBytes || len(r.entries)-drop > r.maxCount) {
		r.bytes -= r.entries[drop].weight
		r.entries[drop] = nil
		drop++
	}
	if drop > 0 {
		r.entries = r.entries[drop:]
		r.first += uint64(drop)
		r.start = r.entries[0].before
		for len(r.segments) > 0 && r.segments[0] <= r.first {
			r.segments = r.segments[1:]
		}
	}
	wake := r.wake
	r.wake = make(chan struct{})
	next := r.first + uint64(len(r.entries))
	r.mu.Unlock()
	close(wake)
	r.appended(next)
}

// close ends the ring: followers get err once they have read every entry.
func (r *ring) close(err error) {
	r.mu.Lock()
	first := r.err == nil
	if first {
		r.err = err
		close(r.wake)
	}
	r.mu.Unlock()
	if first {
		r.closeWaiters()
	}
}

// get returns the entry at seq, waiting for it while block is set. It fails
// with errFellOff when seq was evicted and with the ring's error once the
// tail has stopped and seq was never written.
func (r *ring) get(ctx context.Context, seq uint64, block bool) (*ringEntry, error) {
	for {
		r.mu.RLock()
		next := r.first + uint64(len(r.entries))
		switch {
		case seq < r.first:
			r.mu.RUnlock()
			return nil, errFellOff
		case seq < next:
			e := r.entries[seq-r.first]
			r.mu.RUnlock()
			return e, nil
		case r.err != nil:
			err := r.err
			r.mu.RUnlock()
			return nil, err
		}
		wake := r.wake
		r.mu.RUnlock()
		if !block {
			return nil, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// available reports how many entries from seq on are in the ring.
func (r *ring) available(seq uint64) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	next := r.first + uint64(len(r.entries))
	if seq >= next || seq < r.first {
		return 0
	}
	return int(next - seq)
}

// before returns the tail's position before entry seq (its head position
// for the next entry), or nil when seq is not in the ring.
func (r *ring) before(seq uint64) *binlogdatapb.VGtid {
	r.mu.RLock()
	defer r.mu.RUnlock()
	next := r.first + uint64(len(r.entries))
	switch {
	case seq == next:
		return r.pos
	case seq >= r.first && seq < next:
		return r.entries[seq-r.first].before
	}
	return nil
}

// head returns the tail's current position and the seq of the next entry.
func (r *ring) head() (*binlogdatapb.VGtid, uint64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.pos, r.first + uint64(len(r.entries))
}

// stats reports the ring's fill.
func (r *ring) stats() (entries, bytes int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.entries), r.bytes
}

// joinAt finds where a reader at pos continues in the ring: the newest entry
// whose starting position pos covers on every shard (the reader has every
// earlier transaction; transactions from there on that it already has are
// skipped one by one). It reports false when pos is older than the ring on
// some shard, names other shards than the tail at every point (a reshard
// between them), or cannot be compared (another GTID history): such a
// reader needs a VStream of its own.
func (r *ring) joinAt(pos *binlogdatapb.VGtid) (uint64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.err != nil && !streamEnded(r.err) {
		// A tail that stopped has no more to give. One whose stream
		// ended (its tables dropped) still serves what it has, and then
		// the end, to a reader that gets there.
		return 0, false
	}
	reader := position.Of(pos)
	covers := func(v *binlogdatapb.VGtid) bool {
		p := position.Of(v)
		return reader.Len() == p.Len() && reader.Covers(p)
	}
	next := r.first + uint64(len(r.entries))
	// A reader joins where a transaction starts, never between the
	// pieces of a chunked one: it gets the transaction from its first
	// piece, or privately when that was evicted.
	at := func(seq uint64) (uint64, bool) {
		switch {
		case seq == next && r.open:
			seq = r.openStart
		case seq < next:
			seq = r.entries[seq-r.first].start
		}
		return seq, seq >= r.first
	}
	if covers(r.pos) {
		return at(next)
	}
	// Within a segment positions only grow, so the entries whose start pos
	// covers form a prefix of it: find its end, newest segment first.
	bounds := append(append([]uint64{r.first}, r.segments...), next)
	for k := len(bounds) - 2; k >= 0; k-- {
		lo, hi := bounds[k], bounds[k+1]
		if lo == hi || !covers(r.entries[lo-r.first].before) {
			continue
		}
		n := int(hi - lo)
		i := sort.Search(n, func(i int) bool { return !covers(r.entries[int(lo-r.first)+i].before) })
		return at(lo + uint64(i-1))
	}
	return 0, false
}
