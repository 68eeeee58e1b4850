package position

import "slices"

// The shard-set questions a reader of a stream asks about two positions:
// which shards a transaction moved, whether a reader already has it, where
// the reader stands after it. They live here, with the rest of position
// comparison (DESIGN §2), because the fan-out (DESIGN §5.3), the bridge
// spools and MoveTables following all ask them.

// Keyspace is the keyspace of p's first shard that names one, or def: a
// stream whose tables moved (DESIGN §4.1) is read on another keyspace
// than its definition's.
func (p Position) Keyspace(def string) string {
	for _, sg := range p.v.GetShardGtids() {
		if sg.Keyspace != "" {
			return sg.Keyspace
		}
	}
	return def
}

// ShardNames lists p's shard names, in p's order.
func (p Position) ShardNames() []string {
	out := make([]string, 0, p.Len())
	for _, sg := range p.v.GetShardGtids() {
		out = append(out, sg.Shard)
	}
	return out
}

// SameShards reports whether p and q name the same shards, whatever
// their positions.
func (p Position) SameShards(q Position) bool {
	if p.Len() != q.Len() {
		return false
	}
	for _, sg := range p.v.GetShardGtids() {
		if q.find(sg.Keyspace, sg.Shard) < 0 {
			return false
		}
	}
	return true
}

// Moved lists the shards whose position differs between p (before a
// transaction) and after, shards only after names included: what the
// transaction moved.
func (p Position) Moved(after Position) []string {
	var moved []string
	for _, s := range after.Shards() {
		if o, ok := p.Lookup(s.Keyspace, s.Shard); !ok || o.Text() != s.Text() {
			moved = append(moved, s.Shard)
		}
	}
	return moved
}

// Holds reports whether a reader at p already has a transaction that moved
// the given shards of keyspace to their positions in after: p covers after
// on each of them, and names each.
func (p Position) Holds(keyspace string, after Position, moved []string) bool {
	for _, shard := range moved {
		m, ok1 := p.Lookup(keyspace, shard)
		t, ok2 := after.Lookup(keyspace, shard)
		if !ok1 || !ok2 || !m.Covers(t) {
			return false
		}
	}
	return true
}

// Advance is a reader's position after a transaction that moved the given
// shards to their positions in after: those shards (and shards new to the
// reader, after a reshard) at after's positions, the reader's own positions
// elsewhere; shards after no longer names are dropped.
func (p Position) Advance(after Position, moved []string) Position {
	var out []Shard
	for _, s := range after.Shards() {
		if m, ok := p.Lookup(s.Keyspace, s.Shard); ok && !slices.Contains(moved, s.Shard) {
			s = m
		}
		out = append(out, s)
	}
	return New(out...)
}
