package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// copyAt is a copy-phase position on shard 0: the batch's GTID and t's
// last PK (lastpk "" for a table whose copy has not started).
func copyAt(lastpk string) *binlogdatapb.VGtid {
	tp := &binlogdatapb.TableLastPK{TableName: "t"}
	if lastpk != "" {
		tp.Lastpk = &querypb.QueryResult{
			Fields: []*querypb.Field{{Name: "id", Type: querypb.Type_INT64}},
			Rows:   []*querypb.Row{{Lengths: []int64{int64(len(lastpk))}, Values: []byte(lastpk)}},
		}
	}
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: ks, Shard: "0", Gtid: gtid(7), TablePKs: []*binlogdatapb.TableLastPK{tp}}}}
}

// lastPK renders the last PK a position holds for t.
func lastPK(v *binlogdatapb.VGtid) string {
	for _, sg := range v.GetShardGtids() {
		for _, tp := range sg.TablePKs {
			if tp.TableName == "t" && tp.Lastpk != nil && len(tp.Lastpk.Rows) == 1 {
				return string(tp.Lastpk.Rows[0].Values)
			}
		}
	}
	return ""
}

// A copy batch of 10 rows, cut to rooms of 3, 3, 2 and 5: pieces of 3, 3,
// 2 and 2 rows, each ending at a cursor whose last PK is its last row's
// key; the last piece keeps the batch's own position.
func TestSplitCopy(t *testing.T) {
	key := &querypb.Field{Name: "id", Type: querypb.Type_INT64}
	txn := &source.Txn{VGtid: copyAt("10")}
	for i := 1; i <= 10; i++ {
		id := fmt.Sprint(i)
		txn.Events = append(txn.Events, event.Event{Type: event.TypeChange, Op: event.OpSnapshot, Keyspace: ks, Shard: "0", Table: "t",
			CopyKey: &event.CopyKey{Fields: []*querypb.Field{key}, Values: &querypb.Row{Lengths: []int64{int64(len(id))}, Values: []byte(id)}}})
	}
	var got []string
	last := txn
	for _, n := range []int{3, 3, 2, 5} {
		first, rest, ok := splitCopy(last, n)
		if !ok {
			got = append(got, fmt.Sprintf("%d@%s", len(last.Events), lastPK(last.VGtid)))
			break
		}
		got = append(got, fmt.Sprintf("%d@%s", len(first.Events), lastPK(first.VGtid)))
		last = rest
	}
	if strings.Join(got, " ") != "3@3 3@6 2@8 2@10" {
		t.Fatalf("pieces %v", got)
	}
	if last.VGtid != txn.VGtid || lastPK(txn.VGtid) != "10" || len(txn.Events) != 10 {
		t.Fatal("the last piece does not keep the batch's position, or the batch was modified")
	}
	if _, _, ok := splitCopy(txn, 10); ok {
		t.Fatal("a batch that fits was cut")
	}
	if _, _, ok := splitCopy(txn, 0); ok {
		t.Fatal("cut with no room given")
	}
	// Not a single table's copy batch: left whole.
	mixed := *txn
	mixed.Events = append([]event.Event{{Op: event.OpInsert, Table: "t", Shard: "0", Keyspace: ks}}, txn.Events...)
	if _, _, ok := splitCopy(&mixed, 3); ok {
		t.Fatal("a batch with a binlog row was cut")
	}
	noKey := *txn
	noKey.VGtid = copyAt("")
	if _, _, ok := splitCopy(&noKey, 3); ok {
		t.Fatal("cut without the table's last-PK fields in the position")
	}
}

// The key's columns are put in the order of the position's last-PK fields.
func TestKeyRowOrder(t *testing.T) {
	key := &event.CopyKey{
		Fields: []*querypb.Field{{Name: "a"}, {Name: "b"}},
		Values: &querypb.Row{Lengths: []int64{2, 3}, Values: []byte("xxyyy")},
	}
	row, ok := keyRow([]*querypb.Field{{Name: "b"}, {Name: "a"}}, key)
	if !ok || string(row.Values) != "yyyxx" || row.Lengths[0] != 3 || row.Lengths[1] != 2 {
		t.Fatalf("row %v %v", row, ok)
	}
	if _, ok := keyRow([]*querypb.Field{{Name: "c"}}, key); ok {
		t.Fatal("a field the key lacks was filled")
	}
}

// Through the fake vtgate and the real assembler: a pull-sized
// subscription gets a copy batch in pieces, each with its own cursor.
func TestSubscriptionSplitsCopyBatch(t *testing.T) {
	e := newEnv(t)
	var rows [][]string
	for i := 1; i <= 7; i++ {
		rows = append(rows, []string{fmt.Sprint(i), "x"})
	}
	batch := []*binlogdatapb.VEvent{field(s0), s0.Begin(0), s0.Insert("t", 0, rows...), s0.Pos(copyAt("7")), s0.Commit(0)}
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{batch}})
	s := e.open(t, From{Token: e.token(t, copyAt("0"))})
	s.SplitCopy(3)
	var got []string
	for len(got) < 3 {
		d := next(t, s)
		if len(d.Events) == 0 {
			continue
		}
		v, err := e.hub.Position(context.Background(), e.def, d.Cursor)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summary(t, d.Txn)+"@"+lastPK(v))
	}
	if strings.Join(got, "|") != "1 2 3@3|4 5 6@6|7@7" {
		t.Fatalf("deliveries %v", got)
	}
}
