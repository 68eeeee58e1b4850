package hub

import (
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// TailStatus is a stream's running tail as the operator's console shows it
// (DESIGN §13): where it is and how full its ring is.
type TailStatus struct {
	Position    *binlogdatapb.VGtid
	Entries     int
	Bytes       int
	MaxEntries  int
	MaxBytes    int
	Followers   int       // readers holding the tail now
	OldestAt    time.Time // when the ring's oldest transaction was read (zero when empty)
	HeadCommit  time.Time // commit time of the newest transaction with one (zero when none)
	StartedRing bool      // false while the tail is still starting
}

// TailStatus reports stream's tail on this process; false when none runs.
func (h *Hub) TailStatus(stream string) (TailStatus, bool) {
	h.mu.Lock()
	t := h.tails[stream]
	h.mu.Unlock()
	if t == nil {
		return TailStatus{}, false
	}
	st := TailStatus{MaxEntries: h.tailOpts.RingEntries, MaxBytes: h.tailOpts.RingBytes, Followers: int(t.users.Load())}
	r := t.current()
	if r == nil {
		return st, true
	}
	st.StartedRing = true
	r.mu.RLock()
	defer r.mu.RUnlock()
	st.Position, st.Entries, st.Bytes = r.pos, len(r.entries), r.bytes
	if len(r.entries) > 0 {
		st.OldestAt = r.entries[0].txn.Received
	}
	for i := len(r.entries) - 1; i >= 0; i-- {
		if ts := r.entries[i].txn.CommitTS; ts > 0 {
			st.HeadCommit = time.Unix(ts, 0)
			break
		}
	}
	return st, true
}

// ShardLag is how far a position is behind a stream's tail on one shard.
type ShardLag struct {
	// Transactions the tail has read on the shard that the position lacks.
	Transactions int
	// Seconds is the age of the oldest of them (its commit time to now; 0
	// when none is missing): as vsg_webhook_lag_seconds, the age of the
	// oldest change not yet read.
	Seconds float64
}

// Behind reports, per shard, what the tail's ring holds past pos: the
// transactions a reader at pos has yet to read and how old the first of them
// is. false when no tail runs or its ring does not reach back to pos (the
// reader is further behind than the ring is long, or on other shards).
func (h *Hub) Behind(stream string, pos *binlogdatapb.VGtid) (map[string]ShardLag, bool) {
	h.mu.Lock()
	t := h.tails[stream]
	h.mu.Unlock()
	if t == nil {
		return nil, false
	}
	r := t.current()
	if r == nil {
		return nil, false
	}
	return r.behind(t.def.Keyspace, pos, time.Now())
}

// behind is Behind on one ring, at now.
func (r *ring) behind(keyspace string, pos *binlogdatapb.VGtid, now time.Time) (map[string]ShardLag, bool) {
	seq, ok := r.joinAt(pos)
	if !ok {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]ShardLag{}
	for _, s := range position.Of(r.pos).Shards() {
		out[s.Shard] = ShardLag{}
	}
	first := map[string]int64{}
	for i := int(seq - r.first); i >= 0 && i < len(r.entries); i++ {
		e := r.entries[i]
		if len(e.moved) == 0 || position.Of(pos).Holds(keyspace, position.Of(e.after), e.moved) {
			continue
		}
		for _, shard := range e.moved {
			l := out[shard]
			l.Transactions++
			out[shard] = l
			if ts := e.txn.CommitTS; ts > 0 {
				if _, ok := first[shard]; !ok {
					first[shard] = ts
				}
			}
		}
	}
	for shard, ts := range first {
		l := out[shard]
		l.Seconds = max(0, now.Sub(time.Unix(ts, 0)).Seconds())
		out[shard] = l
	}
	return out, true
}
