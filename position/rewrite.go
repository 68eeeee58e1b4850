package position

import (
	"slices"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// Rewrites return new positions and leave their receiver alone. Entries
// they do not change are shared with it, which is safe because no
// position's entries are ever modified.

// Replace returns p with the entries of keyspace's shards old removed and
// with appended: a reshard cutover, where the journal's participants give
// way to its targets at the positions the journal names. Entries of other
// keyspaces and other shards keep their order. Shards of old that p does
// not name are ignored.
func (p Position) Replace(keyspace string, old []string, with ...Shard) Position {
	v := &binlogdatapb.VGtid{ShardGtids: make([]*binlogdatapb.ShardGtid, 0, p.Len()+len(with))}
	for _, sg := range p.v.GetShardGtids() {
		if sg.GetKeyspace() == keyspace && slices.Contains(old, sg.GetShard()) {
			continue
		}
		v.ShardGtids = append(v.ShardGtids, sg)
	}
	for _, s := range with {
		v.ShardGtids = append(v.ShardGtids, s.proto())
	}
	return Position{v: v}
}

// WithShard returns p with s as its entry for s's shard: in place of the
// entry p has for it, or appended. This is how a shard moves on by itself,
// as vtgate does when one shard's stream reports a new position.
func (p Position) WithShard(s Shard) Position {
	v := &binlogdatapb.VGtid{ShardGtids: slices.Clone(p.v.GetShardGtids())}
	if i := p.find(s.Keyspace, s.Shard); i >= 0 {
		v.ShardGtids[i] = s.proto()
	} else {
		v.ShardGtids = append(v.ShardGtids, s.proto())
	}
	return Position{v: v}
}

// InKeyspace returns the entries of keyspace, in order: the part of a
// position one keyspace's streams and journals are about.
func (p Position) InKeyspace(keyspace string) Position {
	v := &binlogdatapb.VGtid{}
	for _, sg := range p.v.GetShardGtids() {
		if sg.GetKeyspace() == keyspace {
			v.ShardGtids = append(v.ShardGtids, sg)
		}
	}
	return Position{v: v}
}

// ApplyJournal continues p across a reshard cutover: the journal's
// participants give way to its shards at their positions.
func (p Position) ApplyJournal(j *binlogdatapb.Journal) Position {
	targets := Of(&binlogdatapb.VGtid{ShardGtids: j.ShardGtids}).Shards()
	byKeyspace := map[string][]string{}
	for _, part := range j.Participants {
		byKeyspace[part.Keyspace] = append(byKeyspace[part.Keyspace], part.Shard)
	}
	for keyspace, old := range byKeyspace {
		p = p.Replace(keyspace, old)
	}
	return p.Replace("", nil, targets...)
}
