package source

import (
	"strings"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// Positions during a copy phase. vtgate's VGTID lists a shard's tables
// only while they are being copied: the first position of a copy (before
// any table has started) and the positions between two tables carry the
// shard's GTID and no table at all — which is also what a shard that has
// finished copying looks like. A stream resumed from such a position
// replicates from that GTID and copies nothing: the tables still to copy
// are silently skipped, by a reconnect, by a reader's next page or
// reconnect with its cursor, and by a reader joining the stream's tail
// there (a live position, as far as it can tell). So until vtgate says a
// shard finished copying (COPY_COMPLETED for it, or the stream's final
// one), every position handed out keeps that shard at its last position
// that was inside the copy: before any table started, the copy's start
// (no GTID: resumed, the shard is copied from a fresh snapshot, and
// nothing of it was delivered yet); between tables, the last row of the
// table before (resumed, vttablet finds nothing more of it and copies the
// tables after it).

// copyHold is the copy phase's state of the positions an assembler hands
// out. A nil *copyHold holds nothing.
type copyHold struct {
	// last is each shard's last position inside the copy, by
	// "keyspace/shard"; a shard not there is held at start (when set:
	// the stream opened with a keyspace-wide copy of every shard).
	last map[string]*binlogdatapb.ShardGtid
	// start is the keyspace-wide entry the stream opened with, if any.
	start map[string]bool // keyspaces opened with a copy of every shard
	// finished marks the shards whose copy ended.
	finished map[string]bool
}

// newCopyHold returns the hold for a stream opened at pos, or nil when pos
// is not in a copy phase.
func newCopyHold(pos *binlogdatapb.VGtid) *copyHold {
	if !position.Of(pos).Copying() {
		return nil
	}
	h := &copyHold{last: map[string]*binlogdatapb.ShardGtid{}, start: map[string]bool{}, finished: map[string]bool{}}
	for _, sg := range pos.GetShardGtids() {
		switch {
		case sg.Shard == "":
			h.start[sg.Keyspace] = true
		case sg.Gtid == "" || len(sg.TablePKs) > 0:
			h.last[sg.Keyspace+"/"+sg.Shard] = sg
		default:
			h.finished[sg.Keyspace+"/"+sg.Shard] = true
		}
	}
	return h
}

// done records that keyspace/shard finished copying.
func (h *copyHold) done(keyspace, shard string) {
	if h != nil {
		h.finished[keyspace+"/"+shard] = true
	}
}

// hold returns v with every shard still copying kept inside its copy.
func (h *copyHold) hold(v *binlogdatapb.VGtid) *binlogdatapb.VGtid {
	if h == nil || v == nil {
		return v
	}
	var out *binlogdatapb.VGtid
	for i, sg := range v.ShardGtids {
		key := sg.Keyspace + "/" + sg.Shard
		if h.finished[key] {
			continue
		}
		if sg.Gtid == "" || len(sg.TablePKs) > 0 {
			h.last[key] = sg
			continue
		}
		held, ok := h.last[key]
		if !ok {
			if !h.start[sg.Keyspace] {
				continue // not a shard this copy covers
			}
			held = &binlogdatapb.ShardGtid{Keyspace: sg.Keyspace, Shard: sg.Shard}
		}
		if out == nil {
			out = &binlogdatapb.VGtid{ShardGtids: append([]*binlogdatapb.ShardGtid(nil), v.ShardGtids...)}
		}
		out.ShardGtids[i] = held
	}
	if out == nil {
		return v
	}
	return out
}

// tablesToCopy narrows a copy resumed from pos to the tables it has not
// finished. vttablet copies a shard's tables one at a time in name order,
// and vtgate's VGTID names only the one in progress: resumed with it, and
// nothing more said, vttablet copies every table of the filter again, those
// finished before it included. With the tables from the one in progress on
// (the smallest such over the shards still copying), it copies only what is
// left. nil (every table) for a copy not begun on some shard, outside a
// copy, and for a stream with a /regex/ rule, whose tables only vttablet
// lists: there the tables finished before are copied again (README,
// Delivery guarantees).
func tablesToCopy(spec Spec, pos *binlogdatapb.VGtid) []string {
	if !position.Of(pos).Copying() {
		return nil
	}
	from := ""
	for _, sg := range pos.GetShardGtids() {
		if sg.Gtid == "" {
			return nil
		}
		for _, tp := range sg.TablePKs {
			if from == "" || tp.TableName < from {
				from = tp.TableName
			}
		}
	}
	if from == "" {
		return nil
	}
	var out []string
	for _, r := range spec.Rules {
		if strings.HasPrefix(r.Match, "/") {
			return nil
		}
		if r.Match >= from {
			out = append(out, r.Match)
		}
	}
	return out
}
