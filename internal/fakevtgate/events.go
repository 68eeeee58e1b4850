package fakevtgate

import (
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// Shard builds the events vtgate v0.24 sends for one shard of a stream with
// exclude_keyspace_from_table_name: bare table names, every event tagged
// with its keyspace and shard, the tablet's GTID events replaced by VGTID
// events that carry the whole stream position.
type Shard struct{ Keyspace, Name string }

func (s Shard) ev(t binlogdatapb.VEventType, ts int64) *binlogdatapb.VEvent {
	return &binlogdatapb.VEvent{Type: t, Keyspace: s.Keyspace, Shard: s.Name, Timestamp: ts}
}

// Txn is one committed transaction: BEGIN, events, VGTID pos, COMMIT.
func (s Shard) Txn(ts int64, pos *binlogdatapb.VGtid, events ...*binlogdatapb.VEvent) []*binlogdatapb.VEvent {
	out := append([]*binlogdatapb.VEvent{s.Begin(ts)}, events...)
	return append(out, s.Pos(pos), s.ev(binlogdatapb.VEventType_COMMIT, ts))
}

// Begin starts a transaction committed at ts (0 in the copy phase).
func (s Shard) Begin(ts int64) *binlogdatapb.VEvent { return s.ev(binlogdatapb.VEventType_BEGIN, ts) }

// Commit ends a transaction.
func (s Shard) Commit(ts int64) *binlogdatapb.VEvent { return s.ev(binlogdatapb.VEventType_COMMIT, ts) }

// Pos is a VGTID event: the stream position after the current transaction.
func (s Shard) Pos(v *binlogdatapb.VGtid) *binlogdatapb.VEvent {
	e := s.ev(binlogdatapb.VEventType_VGTID, 0)
	e.Vgtid = v
	return e
}

// Field describes a table's columns; vtgate sends it before the table's
// first row on every stream.
func (s Shard) Field(table string, cols ...*querypb.Field) *binlogdatapb.VEvent {
	e := s.ev(binlogdatapb.VEventType_FIELD, 0)
	e.FieldEvent = &binlogdatapb.FieldEvent{TableName: table, Keyspace: s.Keyspace, Shard: s.Name, Fields: cols}
	return e
}

// Insert is a ROW event inserting rows (each a list of column values in
// text form) at binlog time ts; with ts 0 they are copy-phase rows.
func (s Shard) Insert(table string, ts int64, rows ...[]string) *binlogdatapb.VEvent {
	e := s.ev(binlogdatapb.VEventType_ROW, ts)
	e.RowEvent = &binlogdatapb.RowEvent{TableName: table, Keyspace: s.Keyspace, Shard: s.Name}
	for _, vals := range rows {
		r := &querypb.Row{}
		for _, v := range vals {
			r.Lengths = append(r.Lengths, int64(len(v)))
			r.Values = append(r.Values, v...)
		}
		e.RowEvent.RowChanges = append(e.RowEvent.RowChanges, &binlogdatapb.RowChange{After: r})
	}
	return e
}

// DDL is a schema change; vtgate sends a VGTID just before it.
func (s Shard) DDL(ts int64, statement string) *binlogdatapb.VEvent {
	e := s.ev(binlogdatapb.VEventType_DDL, ts)
	e.Statement = statement
	return e
}

// CopyCompleted ends the shard's copy phase.
func (s Shard) CopyCompleted() *binlogdatapb.VEvent {
	return s.ev(binlogdatapb.VEventType_COPY_COMPLETED, 0)
}

// JournalTxn is the reshard journal this shard (a participant) sends where
// it stopped, at local: vtgate delivers it inside the transaction of the
// journal row, with that transaction's VGTID pos (past the cutover on the
// old shard). targets are the new shards' (shard, gtid) pairs.
func (s Shard) JournalTxn(id int64, participants []string, local string, pos *binlogdatapb.VGtid, targets ...string) []*binlogdatapb.VEvent {
	j := &binlogdatapb.Journal{Id: id, MigrationType: binlogdatapb.MigrationType_SHARDS, Tables: []string{"/.*"},
		LocalPosition: local, ShardGtids: VGtid(s.Keyspace, targets...).ShardGtids}
	for _, p := range participants {
		j.Participants = append(j.Participants, &binlogdatapb.KeyspaceShard{Keyspace: s.Keyspace, Shard: p})
	}
	e := s.ev(binlogdatapb.VEventType_JOURNAL, 0)
	e.Journal = j
	return s.Txn(1, pos, e)
}

// Heartbeat is vtgate's own heartbeat (tablet heartbeats never reach
// clients): no keyspace, no shard.
func Heartbeat() *binlogdatapb.VEvent { return Shard{}.ev(binlogdatapb.VEventType_HEARTBEAT, 0) }

// StreamCopied is the COPY_COMPLETED vtgate adds once every shard finished
// copying: no keyspace, no shard.
func StreamCopied() *binlogdatapb.VEvent {
	return Shard{}.ev(binlogdatapb.VEventType_COPY_COMPLETED, 0)
}

// VGtid builds a position of keyspace from shard, gtid pairs.
func VGtid(keyspace string, shardGtid ...string) *binlogdatapb.VGtid {
	v := &binlogdatapb.VGtid{}
	for i := 0; i+1 < len(shardGtid); i += 2 {
		v.ShardGtids = append(v.ShardGtids, &binlogdatapb.ShardGtid{Keyspace: keyspace, Shard: shardGtid[i], Gtid: shardGtid[i+1]})
	}
	return v
}

// BigintPK is a BIGINT AUTO_INCREMENT PRIMARY KEY column as MariaDB 10.11
// sends it through Vitess v0.24 (see event/samples_test.go).
func BigintPK(name string) *querypb.Field {
	return &querypb.Field{Name: name, Type: querypb.Type_INT64, Flags: 49667, ColumnLength: 20, Charset: 63, ColumnType: "bigint(20)"}
}

// LongText is a utf8mb4_bin LONGTEXT column: what MariaDB's JSON type is,
// and indistinguishable in a FIELD event from a plain LONGTEXT.
func LongText(name string) *querypb.Field {
	return &querypb.Field{Name: name, Type: querypb.Type_BLOB, Flags: 16 | 128, ColumnLength: 4294967295, Charset: 46, ColumnType: "longtext"}
}
