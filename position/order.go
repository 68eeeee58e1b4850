package position

import (
	"vitess.io/vitess/go/mysql/replication"
)

// Order is how one position stands to another.
type Order int8

// Orders. The zero Order is Incomparable, so a comparison that did not
// happen never reads as an order.
const (
	// Incomparable: neither contains the other (disjoint domains or
	// servers, a gap on each side, different flavors, different shards),
	// or one side is not a GTID set at all.
	Incomparable Order = iota
	// Before: strictly behind; the other has seen everything this one has
	// and more.
	Before
	// Equal: the same GTID sets.
	Equal
	// After: strictly ahead.
	After
)

func (o Order) String() string {
	switch o {
	case Before:
		return "before"
	case Equal:
		return "equal"
	case After:
		return "after"
	}
	return "incomparable"
}

// ParseGTID reads one entry's GTID as vstreamer encodes it (flavor/set,
// see replication.EncodePosition). An empty set, "" and "current" are
// ErrNoGTID: they are not binlog positions, so they order with nothing.
// An incarnation after the set (incarnation.go) is ignored.
func ParseGTID(gtid string) (replication.Position, error) {
	gtid, _ = splitIncarnation(gtid)
	if gtid == "" || gtid == CurrentGTID {
		return replication.Position{}, &Error{Kind: ErrNoGTID, Input: gtid}
	}
	p, err := replication.DecodePosition(gtid)
	if err != nil {
		return replication.Position{}, &Error{Kind: ErrBadGTID, Input: gtid, Err: err}
	}
	if p.IsZero() {
		return replication.Position{}, &Error{Kind: ErrNoGTID, Input: gtid}
	}
	return p, nil
}

// CompareGTID orders two GTID sets of one shard. Containment decides, as
// in Vitess (Position.AtLeast): a set is at or after another when it holds
// every transaction of it. For MariaDB that is per replication domain by
// sequence number, so the same sequence written under another server id
// (after a failover) is Equal. Anything ParseGTID refuses is Incomparable,
// and so are sets of two incarnations of the shard (incarnation.go).
func CompareGTID(a, b string) Order {
	a, ia := splitIncarnation(a)
	b, ib := splitIncarnation(b)
	if ia != ib {
		return Incomparable
	}
	pa, err := parseCached(a)
	if err != nil {
		return Incomparable
	}
	pb, err := parseCached(b)
	if err != nil {
		return Incomparable
	}
	ab, ba := pa.AtLeast(pb), pb.AtLeast(pa)
	switch {
	case ab && ba:
		return Equal
	case ab:
		return After
	case ba:
		return Before
	}
	return Incomparable
}

// Compare orders s and t, two entries of the same shard. Entries of
// different shards (another name, or another incarnation of the name),
// and entries in a copy phase, are Incomparable: rows copied from a
// snapshot are not binlog transactions, so no GTID says how far a copy
// got.
func (s Shard) Compare(t Shard) Order {
	if s.Keyspace != t.Keyspace || s.Shard != t.Shard || s.Incarnation != t.Incarnation || s.Copying() || t.Copying() {
		return Incomparable
	}
	return CompareGTID(s.GTID, t.GTID)
}

// Covers reports whether s is at or after t: a reader at s has seen
// everything a reader at t has.
func (s Shard) Covers(t Shard) bool {
	o := s.Compare(t)
	return o == Equal || o == After
}

// Compare orders two whole positions. They compare only when they name the
// same shards (in any order), each once: Equal when every shard is Equal,
// Before when every shard is Before or Equal and one is Before, After
// likewise, and Incomparable otherwise: a position ahead on one shard and
// behind on another is neither. Positions without entries are
// Incomparable.
func (p Position) Compare(q Position) Order {
	n := p.Len()
	if n == 0 || n != q.Len() {
		return Incomparable
	}
	// Each entry of p must find its own entry of q: with equal lengths
	// that also rules out a shard listed twice on either side.
	matched := make([]bool, n)
	out := Equal
	for _, sg := range p.v.ShardGtids {
		j := q.find(sg.GetKeyspace(), sg.GetShard())
		if j < 0 || matched[j] {
			return Incomparable
		}
		matched[j] = true
		switch o := shardOf(sg).Compare(shardOf(q.v.ShardGtids[j])); {
		case o == Incomparable:
			return Incomparable
		case o == Equal:
		case out == Equal:
			out = o
		case out != o:
			return Incomparable
		}
	}
	return out
}

// Covers reports whether p is at or after q on every shard q names (p may
// name more): a reader at p has seen everything a reader at q has, on
// q's shards. Every position covers one without entries.
func (p Position) Covers(q Position) bool {
	for _, sg := range q.v.GetShardGtids() {
		if !p.covers(shardOf(sg)) {
			return false
		}
	}
	return true
}

// ShardsBehind returns the entries of q that p does not cover: the shard
// is missing from p, or p's entry is before q's or incomparable with it
// (a copy phase, disjoint GTID sets). They are where a reader at p has
// something to catch up on, or cannot tell, before it stands where q is.
func (p Position) ShardsBehind(q Position) []Shard {
	var out []Shard
	for _, sg := range q.v.GetShardGtids() {
		if t := shardOf(sg); !p.covers(t) {
			out = append(out, t)
		}
	}
	return out
}

func (p Position) covers(t Shard) bool {
	i := p.find(t.Keyspace, t.Shard)
	return i >= 0 && shardOf(p.v.ShardGtids[i]).Covers(t)
}
