package position

import (
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// Shard is one entry of a position: where one shard of a keyspace is.
type Shard struct {
	Keyspace string
	// Shard is empty in a keyspace-wide entry (vtgate expands it to every
	// shard of the keyspace when the stream opens).
	Shard string
	// GTID is the GTID set as vstreamer encodes it ("MariaDB/0-1-5",
	// "MySQL56/<uuid>:1-10"), CurrentGTID, or empty (copy from the
	// beginning).
	GTID string
	// TablePKs is the copy phase's progress: the last primary key copied
	// per table. Shared, not copied: it must not be modified.
	TablePKs []*binlogdatapb.TableLastPK
	// Incarnation tells shards of the same name apart (incarnation.go):
	// empty for a name no recorded reshard retired.
	Incarnation string
}

func shardOf(sg *binlogdatapb.ShardGtid) Shard {
	gtid, inc := splitIncarnation(sg.GetGtid())
	return Shard{Keyspace: sg.GetKeyspace(), Shard: sg.GetShard(), GTID: gtid, TablePKs: sg.GetTablePKs(), Incarnation: inc}
}

func (s Shard) proto() *binlogdatapb.ShardGtid {
	return &binlogdatapb.ShardGtid{Keyspace: s.Keyspace, Shard: s.Shard, Gtid: joinIncarnation(s.GTID, s.Incarnation), TablePKs: s.TablePKs}
}

// Key names the shard as vtgate and the topology do: "keyspace/shard".
func (s Shard) Key() string { return s.Keyspace + "/" + s.Shard }

// Concrete reports whether the entry is an exact resume point for its
// shard (see Position.Concrete).
func (s Shard) Concrete() bool { return s.Shard != "" && s.GTID != CurrentGTID }

// Copying reports whether the shard is in a copy phase: not started (no
// GTID) or part way through its tables (TablePKs).
func (s Shard) Copying() bool { return s.GTID == "" || len(s.TablePKs) > 0 }

// String renders the entry as "keyspace/shard@gtid", with " (copying)"
// when table progress is attached.
func (s Shard) String() string {
	out := s.Keyspace
	if s.Shard != "" {
		out += "/" + s.Shard
	}
	out += "@" + joinIncarnation(s.GTID, s.Incarnation)
	if len(s.TablePKs) > 0 {
		out += " (copying)"
	}
	return out
}
