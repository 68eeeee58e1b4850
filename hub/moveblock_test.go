package hub

import (
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// DESIGN §4.1: a cutover that moved only some of the stream's tables
// (recorded as a block, not a move) is announced once by a `blocked`
// event after the last transaction before it; the reader stays on its
// keyspace and reads on.
func TestMoveBlockedPartial(t *testing.T) {
	fm := &fakeMover{block: &streams.Block{Reason: streams.BlockPartialMove, Journal: "jp", From: ks, To: commerceKs,
		Tables: []string{"t"}, Local: map[string]string{"-80": gtid(20), "80-": gtid(20)}}}
	e := newEnv(t, WithMoveWatch(fm))
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		sLo.Txn(100, two(11, 10), field(sLo), row(sLo, "1")),
		sLo.Txn(100, two(20, 10), row(sLo, "2")),
		sHi.Txn(100, two(20, 11), field(sHi), row(sHi, "4")),
		sHi.Txn(100, two(20, 20), row(sHi, "5")), // both shards at the cutover
		sLo.Txn(100, two(21, 20), row(sLo, "6")),
		sHi.Txn(100, two(21, 21), row(sHi, "7")),
	}})
	s := e.open(t, From{Token: e.token(t, two(10, 10))})
	for _, want := range []string{"1", "2", "4", "5", "blocked", "6", "7"} {
		d := next(t, s)
		if got := summary(t, d.Txn); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if want == "blocked" {
			b := d.Txn.Events[0]
			if b.Type != event.TypeBlocked || member(t, b, "reason") != `"partial_move"` || member(t, b, "tables") != `["t"]` ||
				member(t, b, "to") != `"commerce"` || member(t, b, "journal") != `"jp"` {
				t.Fatalf("blocked notice: %s", b.AppendJSON(nil, ""))
			}
		}
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1 (the reader stays on its keyspace)", n)
	}

}
