package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// mergePos is a position on the two shards of a merge (-80,80- → 0) after
// transaction lo of -80 and hi of 80-.
func mergePos(lo, hi int) *binlogdatapb.VGtid {
	return fakevtgate.VGtid(ks, "-80", fmt.Sprintf("MariaDB/0-2-%d", lo), "80-", fmt.Sprintf("MariaDB/0-3-%d", hi))
}

// spooledMerge gives alice (acked at -80:10, 80-:10) a bridge across a
// merge whose spool interleaves the two old shards: ids 1, 3, 5 on -80,
// ids 2, 4, 6 on 80-. The old shards are gone; the stream continues on
// shard 0 at pos(50).
func spooledMerge(t *testing.T) *env {
	t.Helper()
	var txns []*source.Txn
	lo, hi := 10, 10
	for id := 1; id <= 6; id++ {
		shard := "-80"
		if id%2 == 0 {
			shard, hi = "80-", hi+1
		} else {
			lo++
		}
		txns = append(txns, &source.Txn{VGtid: mergePos(lo, hi), Events: []event.Event{spoolRow(shard, id)}})
	}
	return withSpool(t, txns...)
}

// spoolRow is an insert of id into t on shard, as a spool entry holds it.
func spoolRow(shard string, id int) event.Event {
	return event.Event{Type: event.TypeChange, Op: event.OpInsert, Keyspace: ks, Shard: shard, Table: "t",
		JSON: fmt.Appendf(nil, `{"type":"change","op":"insert","table":"t","after":{"id":%d}`, id)}
}

// withSpool gives alice (acked at -80:10, 80-:10) a bridge across a merge
// whose spool holds txns; the old shards are gone and the stream continues
// on shard 0 at pos(50).
func withSpool(t *testing.T, txns ...*source.Txn) *env {
	t.Helper()
	ctx := context.Background()
	e := newEnv(t)
	e.ack(t, "alice", mergePos(10, 10))
	log := "spool/orders/alice/merge"
	events := 0
	for _, txn := range txns {
		txn.CommitTS = 100
		b, err := EncodeSpoolEntry(txn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Append(ctx, log, b); err != nil {
			t.Fatal(err)
		}
		events += len(txn.Events)
	}
	st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil {
		t.Fatal(err)
	}
	from, _ := position.Of(mergePos(10, 10)).Marshal()
	after, _ := position.Of(pos(50)).Marshal()
	st.Bridges = []Bridge{{Journal: "merge", Log: log, From: from, After: after, Events: events}}
	e.putState(t, st)
	e.fake.SetTopology(ks, []string{"0"}, nil)
	return e
}

// A cursor inside a spool that no spool entry has — ahead on one old shard,
// behind on the other, as a reader gets from a tail or a replica that
// interleaved the shards differently — resumes per shard: it gets exactly
// the spooled transactions it lacks on each shard, each with its own
// position advanced on that shard, then the stream after the bridge.
func TestSpoolJoinsPerShard(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		from *binlogdatapb.VGtid
		want []string
		// positions after each delivery
		at []*binlogdatapb.VGtid
	}{
		{"acked position", mergePos(10, 10), []string{"1", "2", "3", "4", "5", "6"}, nil},
		{"an entry's position", mergePos(12, 12), []string{"5", "6"}, []*binlogdatapb.VGtid{mergePos(13, 12), mergePos(13, 13)}},
		{"ahead on -80", mergePos(13, 11), []string{"4", "6"}, []*binlogdatapb.VGtid{mergePos(13, 12), mergePos(13, 13)}},
		{"ahead on 80-", mergePos(11, 13), []string{"3", "5"}, []*binlogdatapb.VGtid{mergePos(12, 13), mergePos(13, 13)}},
		{"ahead on -80 by one", mergePos(12, 10), []string{"2", "4", "5", "6"}, []*binlogdatapb.VGtid{mergePos(12, 11), mergePos(12, 12), mergePos(13, 12), mergePos(13, 13)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := spooledMerge(t)
			s := e.open(t, From{Token: e.token(t, c.from), Subscriber: "alice"})
			for i, want := range c.want {
				d := next(t, s)
				if got := summary(t, d.Txn); got != want {
					t.Fatalf("delivery %d: %q, want %q", i, got, want)
				}
				if c.at == nil {
					continue
				}
				p, err := e.hub.Position(ctx, e.def, d.Cursor)
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(p, c.at[i]) {
					t.Fatalf("delivery %d (%s): cursor at %v, want %v", i, want, p, c.at[i])
				}
			}
			// Then the stream after the bridge, from its end.
			s0 := fakevtgate.Shard{Keyspace: ks, Name: "0"}
			e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(51), field(s0), row(s0, "7"))}})
			if got := summary(t, next(t, s).Txn); got != "7" {
				t.Fatalf("after the spool: %q, want 7", got)
			}
			samePos(t, "after the spool", e.fake.Call(t, 0).Req.Vgtid, pos(50))
		})
	}
}

// A spool keeps the schema of every change event it holds (once per
// entry), so a replayed spool re-encodes in other formats like the tail
// (DESIGN §3.2); control events have none.
func TestSpoolEntryKeepsSchemas(t *testing.T) {
	fields := []*querypb.Field{
		{Name: "id", Type: querypb.Type_INT32, Flags: uint32(querypb.MySqlFlag_PRI_KEY_FLAG | querypb.MySqlFlag_NOT_NULL_FLAG)},
		{Name: "c", Type: querypb.Type_ENUM, Charset: 45, ColumnType: "enum('a','b''c')"},
		{Name: "d", Type: querypb.Type_DATETIME, Charset: 63, Decimals: 6},
	}
	tbl, err := event.NewTable(ks, "-80", &binlogdatapb.FieldEvent{TableName: "t", Fields: fields}, event.Options{})
	if err != nil {
		t.Fatal(err)
	}
	row := func(id string) *querypb.Row {
		vals := []string{id, "b'c", "2024-06-01 12:34:56.000120"}
		r := &querypb.Row{}
		for _, v := range vals {
			r.Lengths = append(r.Lengths, int64(len(v)))
			r.Values = append(r.Values, v...)
		}
		return r
	}
	var evs []event.Event
	for _, id := range []string{"1", "2"} {
		ev, err := tbl.Encode(event.OpInsert, &binlogdatapb.RowChange{After: row(id)}, 100)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	evs = append(evs, event.Control(event.TypeDDL, ks, "-80", map[string]any{"statement": "alter table t"}))
	b, err := EncodeSpoolEntry(&source.Txn{VGtid: pos(7), Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `["a","b'c"]`); n != 1 {
		t.Errorf("the schema is stored %d times, want once per entry: %s", n, b)
	}
	got, err := DecodeSpoolEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := got.Events[0].Schema, got.Events[1].Schema
	if s0 == nil || s0 != s1 || got.Events[2].Schema != nil {
		t.Fatalf("schemas after decoding: %p %p %p", s0, s1, got.Events[2].Schema)
	}
	want, _ := json.Marshal(tbl.Schema())
	if g, _ := json.Marshal(s0); string(g) != string(want) {
		t.Errorf("schema\ngot  %s\nwant %s", g, want)
	}
	if v := s0.Columns[1].Values; len(v) != 2 || v[1] != "b'c" {
		t.Errorf("ENUM members %q", v)
	}
	// An entry that names a schema it does not hold is refused.
	bad := strings.Replace(string(b), `"x":1`, `"x":2`, 1)
	if _, err := DecodeSpoolEntry([]byte(bad)); err == nil {
		t.Error("an entry naming a missing schema was accepted")
	}
}
