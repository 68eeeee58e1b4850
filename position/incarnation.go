package position

import (
	"strings"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// A shard name is not an identity. After 0 → -80,80- → 0 the second shard
// "0" is another MariaDB with another binlog: its GTID sequence starts
// again, often with the same server id, so a GTID set of the first "0"
// reads as behind, equal to or ahead of one of the second by accident. A
// cursor taken on the old shard and handed to the new one would skip or
// repeat rows, and two readers on different incarnations would take each
// other's positions for their own.
//
// So every entry carries its shard's incarnation: empty for a shard name
// that no recorded reshard ever took out of service (the common case,
// and every position minted before incarnations existed), otherwise the
// key of the latest recorded reshard journal that had the name among its
// participants — the name was retired there, so a shard serving under
// it now was created after it (reshard/incarnation.go decides). Entries
// of different incarnations compare as different shards: Incomparable,
// never covering each other.
//
// vtgate knows nothing of incarnations, and VGtid has no field for one, so
// the incarnation travels in the entry's GTID text after IncarnationSep:
// "MariaDB/0-101-378~3fa9c1d2e4b5a6b7c8d9e0f1". Cursor tokens, stored
// states, spools and the tail's ring keep it as they keep the GTID;
// Shard splits it off, and ForVTGate takes it out of a position before
// vtgate sees it. An entry without an incarnation has none in its text,
// so positions of never-retired shard names read exactly as before.

// IncarnationSep separates an entry's GTID text from its incarnation. It
// appears in no GTID set's text (MariaDB: digits, '-', ','; MySQL: hex,
// '-', ':', ',') nor in "current".
const IncarnationSep = "~"

// splitIncarnation splits an entry's GTID text into the GTID vtgate
// understands and the incarnation.
func splitIncarnation(text string) (gtid, incarnation string) {
	if i := strings.LastIndex(text, IncarnationSep); i >= 0 {
		return text[:i], text[i+len(IncarnationSep):]
	}
	return text, ""
}

// joinIncarnation is splitIncarnation's inverse. Entries that are not
// binlog positions (an empty GTID, "current") carry no incarnation: they
// name no history, so none can be confused.
func joinIncarnation(gtid, incarnation string) string {
	if incarnation == "" || gtid == "" || gtid == CurrentGTID {
		return gtid
	}
	return gtid + IncarnationSep + incarnation
}

// Entry returns the entry of keyspace/shard whose GTID text (as positions
// hold it, with the incarnation if any) is text.
func Entry(keyspace, shard, text string) Shard {
	gtid, inc := splitIncarnation(text)
	return Shard{Keyspace: keyspace, Shard: shard, GTID: gtid, Incarnation: inc}
}

// Text is the entry's GTID text as positions hold it: the GTID and the
// incarnation, if any.
func (s Shard) Text() string { return joinIncarnation(s.GTID, s.Incarnation) }

// WithIncarnation returns s as an entry of the shard's given incarnation.
func (s Shard) WithIncarnation(incarnation string) Shard {
	s.Incarnation = incarnation
	return s
}

// Stamped reports whether some entry carries an incarnation.
func (p Position) Stamped() bool {
	for _, sg := range p.v.GetShardGtids() {
		if strings.Contains(sg.GetGtid(), IncarnationSep) {
			return true
		}
	}
	return false
}

// ForVTGate returns p as vtgate must see it: without incarnations. p
// itself is returned when it carries none.
func (p Position) ForVTGate() *binlogdatapb.VGtid {
	if !p.Stamped() {
		return p.v
	}
	v := &binlogdatapb.VGtid{ShardGtids: make([]*binlogdatapb.ShardGtid, len(p.v.ShardGtids))}
	for i, sg := range p.v.ShardGtids {
		gtid, _ := splitIncarnation(sg.GetGtid())
		v.ShardGtids[i] = &binlogdatapb.ShardGtid{Keyspace: sg.Keyspace, Shard: sg.Shard, Gtid: gtid, TablePKs: sg.TablePKs}
	}
	return v
}

// Incarnations returns the incarnation of each concrete entry of p by
// "keyspace/shard" (entries without one included, as ""): what a reader
// opened at p reads, until a reshard moves it to other shards.
func (p Position) Incarnations() map[string]string {
	out := make(map[string]string, p.Len())
	for _, sg := range p.v.GetShardGtids() {
		if s := shardOf(sg); s.Shard != "" && s.GTID != "" && s.GTID != CurrentGTID {
			out[s.Key()] = s.Incarnation
		}
	}
	return out
}

// Stamp returns v (as vtgate sent it, without incarnations) with each
// entry given its incarnation by inc; an entry inc does not know
// (ok false) fails the whole position with the error inc returned. v is
// returned as it is when every incarnation is empty.
func Stamp(v *binlogdatapb.VGtid, inc func(keyspace, shard string) (string, error)) (*binlogdatapb.VGtid, error) {
	var out *binlogdatapb.VGtid
	for i, sg := range v.GetShardGtids() {
		s := shardOf(sg)
		if s.Shard == "" || s.GTID == "" || s.GTID == CurrentGTID {
			continue
		}
		want, err := inc(s.Keyspace, s.Shard)
		if err != nil {
			return nil, err
		}
		if want == s.Incarnation {
			continue
		}
		if out == nil {
			out = &binlogdatapb.VGtid{ShardGtids: append([]*binlogdatapb.ShardGtid(nil), v.ShardGtids...)}
		}
		out.ShardGtids[i] = s.WithIncarnation(want).proto()
	}
	if out == nil {
		return v, nil
	}
	return out, nil
}
