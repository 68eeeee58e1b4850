package source_test

import (
	"context"
	"slices"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// copyAt is shard 0 at gtid n, copying t with its last row copied at id
// (no last row: t not started).
func copyAt(n int, id string) *binlogdatapb.VGtid {
	tp := &binlogdatapb.TableLastPK{TableName: "t"}
	if id != "" {
		tp.Lastpk = &querypb.QueryResult{Fields: []*querypb.Field{{Name: "id", Type: querypb.Type_INT64}},
			Rows: []*querypb.Row{{Lengths: []int64{int64(len(id))}, Values: []byte(id)}}}
	}
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: ks, Shard: "0", Gtid: gtid(n), TablePKs: []*binlogdatapb.TableLastPK{tp}}}}
}

// A copy phase as the local cluster sends it: a first position with the
// shard's GTID and no table (before the copy starts), a heartbeat, the
// copied rows with their table's last row, a position with no table again
// (the table is done), COPY_COMPLETED for the shard and for the stream.
// Until the copy is over, no position handed out lets a stream resumed
// from it skip the copy: the first ones are the copy's start, the one
// after the table is the table's last row. The reader reconnecting in the
// middle resumes there too.
func TestCopyPositionsStayInsideTheCopy(t *testing.T) {
	fake, c := setup(t)
	start := &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: ks, Shard: "0"}}}
	fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		{s0.Pos(pos(10))},
		{fakevtgate.Heartbeat()},
		s0.Txn(0, copyAt(10, ""), tField),
		s0.Txn(0, copyAt(10, "2"), s0.Insert("t", 0, []string{"1", "a"}, []string{"2", "b"})),
		{s0.Pos(pos(10))},
	}, Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vstream ended: error streaming from tablet: connection refused")})
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(0, copyAt(10, "2"), tField),
		{s0.Pos(pos(10))},
		{s0.CopyCompleted()},
		{s0.Pos(pos(11))},
		{fakevtgate.StreamCopied()},
		s0.Txn(100, pos(12), s0.Insert("t", 100, []string{"3", "c"})),
	}})
	r := open(t, c, source.SnapshotPosition(ks))

	for i, want := range []*binlogdatapb.VGtid{start, start, copyAt(10, ""), copyAt(10, "2"), copyAt(10, "2")} {
		txn := next(t, r)
		samePos(t, "in the copy", txn.VGtid, want)
		if i == 3 && summary(t, txn) != `snapshot {"id":1,"doc":"a"}; snapshot {"id":2,"doc":"b"}` {
			t.Fatalf("copy rows: %s", summary(t, txn))
		}
	}
	// The reconnect resumes inside the copy, at t's last row.
	samePos(t, "resumed from", fake.Call(t, 1).Req.Vgtid, copyAt(10, "2"))
	for _, want := range []*binlogdatapb.VGtid{copyAt(10, "2"), copyAt(10, "2"), pos(11)} {
		samePos(t, "after the reconnect", next(t, r).VGtid, want)
	}
	txn := next(t, r)
	if len(txn.Events) != 1 || txn.Events[0].Type != event.TypeSnapshotComplete {
		t.Fatalf("after the copy: %s, want snapshot_complete", summary(t, txn))
	}
	samePos(t, "snapshot_complete", txn.VGtid, pos(11))
	txn = next(t, r)
	if got := summary(t, txn); got != `insert {"id":3,"doc":"c"}` {
		t.Fatalf("after the copy: %s", got)
	}
	samePos(t, "binlog", txn.VGtid, pos(12))
}

// A copy resumed inside its second table asks vtgate to copy only the
// tables from that one on (vttablet copies in name order and would copy
// the finished ones again); a copy from the start, or with a /regex/ rule,
// copies every table.
func TestResumedCopySkipsFinishedTables(t *testing.T) {
	abc := source.Spec{Name: "abc", Keyspace: ks, Rules: []*binlogdatapb.Rule{
		{Match: "c", Filter: "select * from `c`"}, {Match: "a", Filter: "select * from `a`"}, {Match: "b", Filter: "select * from `b`"}}}
	inB := &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{
		{Keyspace: ks, Shard: "-80", Gtid: gtid(10), TablePKs: []*binlogdatapb.TableLastPK{{TableName: "c"}}},
		{Keyspace: ks, Shard: "80-", Gtid: gtid(10), TablePKs: []*binlogdatapb.TableLastPK{{TableName: "b"}}}}}
	regex := source.Spec{Name: "re", Keyspace: ks, Rules: []*binlogdatapb.Rule{{Match: "/.*/"}}}
	for _, tc := range []struct {
		name string
		spec source.Spec
		from *binlogdatapb.VGtid
		want []string
	}{
		{"inside b on one shard, c on the other", abc, inB, []string{"c", "b"}},
		{"from the start", abc, source.SnapshotPosition(ks), nil},
		{"after the copy", abc, pos(10), nil},
		{"regex rule", regex, inB, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, c := setup(t)
			fake.Push(fakevtgate.Script{Open: true})
			r := c.Open(context.Background(), tc.spec, tc.from)
			defer r.Close()
			got := fake.Call(t, 0).Req.GetFlags().GetTablesToCopy()
			if !slices.Equal(got, tc.want) {
				t.Fatalf("TablesToCopy %q, want %q", got, tc.want)
			}
		})
	}
}
