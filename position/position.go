package position

import (
	"strings"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// CurrentGTID is the GTID vtgate reads as "this shard's position at the
// moment the stream opens".
const CurrentGTID = "current"

// Position is a stream position: a VGtid treated as an immutable value.
// The zero Position has no shards.
type Position struct {
	v *binlogdatapb.VGtid
}

// Of wraps v without copying it. v and its entries must not be modified
// afterwards: readers hand out positions that are shared by every
// transaction, cursor and rewrite made from them.
func Of(v *binlogdatapb.VGtid) Position { return Position{v: v} }

// New returns the position made of shards, in that order.
func New(shards ...Shard) Position {
	v := &binlogdatapb.VGtid{ShardGtids: make([]*binlogdatapb.ShardGtid, len(shards))}
	for i, s := range shards {
		v.ShardGtids[i] = s.proto()
	}
	return Position{v: v}
}

// VGtid returns the wrapped VGtid (nil for the zero Position), for the
// protobuf APIs that take one. It must not be modified.
func (p Position) VGtid() *binlogdatapb.VGtid { return p.v }

// Clone returns a deep copy, whose VGtid the caller may modify.
func (p Position) Clone() Position {
	if p.v == nil {
		return p
	}
	return Position{v: proto.Clone(p.v).(*binlogdatapb.VGtid)}
}

// Len is the number of entries.
func (p Position) Len() int { return len(p.v.GetShardGtids()) }

// IsZero reports whether p has no entries: it is no position at all, and
// vtgate refuses to open a stream from it.
func (p Position) IsZero() bool { return p.Len() == 0 }

// Shards returns the entries in order.
func (p Position) Shards() []Shard {
	out := make([]Shard, p.Len())
	for i, sg := range p.v.GetShardGtids() {
		out[i] = shardOf(sg)
	}
	return out
}

// Lookup returns the entry of keyspace/shard.
func (p Position) Lookup(keyspace, shard string) (Shard, bool) {
	if i := p.find(keyspace, shard); i >= 0 {
		return shardOf(p.v.ShardGtids[i]), true
	}
	return Shard{}, false
}

// find returns the index of the first entry of keyspace/shard, or -1.
// Positions hold a handful of shards: a scan beats building a map.
func (p Position) find(keyspace, shard string) int {
	for i, sg := range p.v.GetShardGtids() {
		if sg.GetShard() == shard && sg.GetKeyspace() == keyspace {
			return i
		}
	}
	return -1
}

// Identical reports whether p and q are the same position entry for entry,
// in the same order and with the same GTID text and copy progress: what
// was stored is what is read. Positions without entries are identical
// whether or not they wrap a VGtid. Compare tells whether two positions
// that differ in text are the same GTID sets.
func (p Position) Identical(q Position) bool {
	if p.IsZero() || q.IsZero() {
		return p.IsZero() && q.IsZero()
	}
	return proto.Equal(p.v, q.v)
}

// Concrete reports whether p is an exact resume point: it has entries,
// each names its shard, and none is "current". Resuming from it delivers
// what follows the point where it was taken, whoever opens it and
// whenever. A keyspace-only entry or "current" lets vtgate choose the
// shards or their binlog positions when the stream opens, so two readers
// from such a position need not see the same events: no cursor may be
// minted for it and no reshard rebuild applies to it.
//
// A named shard with an empty GTID is concrete. vtgate sends such entries
// during a copy phase for shards whose copy has not started yet, and
// resuming from one starts that shard's copy from the beginning: exactly
// what a reader at that point has not seen. Copying tells those positions
// apart.
func (p Position) Concrete() bool {
	if p.IsZero() {
		return false
	}
	for _, sg := range p.v.ShardGtids {
		if !shardOf(sg).Concrete() {
			return false
		}
	}
	return true
}

// Copying reports whether some shard is in a copy phase (not started, or
// part way through its tables).
func (p Position) Copying() bool {
	for _, sg := range p.v.GetShardGtids() {
		if shardOf(sg).Copying() {
			return true
		}
	}
	return false
}

// AtOpen reports whether some entry is "current": its binlog position is
// fixed only when vtgate opens the stream.
func (p Position) AtOpen() bool {
	for _, sg := range p.v.GetShardGtids() {
		if sg.GetGtid() == CurrentGTID {
			return true
		}
	}
	return false
}

// String renders p compactly for logs and test failures:
// "customer/-80@MariaDB/0-1-5 customer/80-@MariaDB/0-2-9".
func (p Position) String() string {
	if p.IsZero() {
		return "(none)"
	}
	var b strings.Builder
	for i, sg := range p.v.ShardGtids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shardOf(sg).String())
	}
	return b.String()
}
