package hub

import (
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// droppedScript is what a stream on the source sees at `MoveTables
// complete` without --vtctld: a row, the DROP TABLE, then nothing.
func droppedScript() fakevtgate.Script {
	return fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		{s0.Pos(pos(12)), s0.DDL(100, "drop table if exists `vt_customer`.`t`")},
	}}
}

// DESIGN §4.1 rule 9: without --vtctld, a stream whose tables are dropped
// reports a gap under on_gap, never silence: resync (reason
// tables_dropped) after the DDL, or the stream ends with a
// upstream.TablesDroppedError (409) before it.
func TestTablesDropped(t *testing.T) {
	t.Run("resync", func(t *testing.T) {
		e := newEnv(t)
		e.fake.Push(droppedScript())
		s := e.open(t, From{Token: e.token(t, pos(10))})
		readUpToDrop(t, s)
		d := nonEmpty(t, s)
		if len(d.Events) != 1 || d.Events[0].Type != event.TypeResync || member(t, d.Events[0], "reason") != `"tables_dropped"` ||
			member(t, d.Events[0], "tables") != `["t"]` {
			t.Fatalf("after the DROP: %q, want a resync notice", summary(t, d.Txn))
		}
		samePos(t, "the notice's cursor", d.VGtid, pos(12))
	})
	t.Run("fail", func(t *testing.T) {
		e := newEnv(t)
		e.def.OnGap = streams.OnGapFail
		e.fake.Push(droppedScript())
		s := e.open(t, From{Token: e.token(t, pos(10))})
		if got := summary(t, nonEmpty(t, s).Txn); got != "1" {
			t.Fatalf("got %q, want the row", got)
		}
		// The stream ends before the DROP: the last cursor is before it.
		wantDropped(t, "after the row", s)
	})
}

// nonEmpty is the next delivery with events (position-only ones skipped).
func nonEmpty(t *testing.T, s *Subscription) *Delivery {
	t.Helper()
	for {
		if d := next(t, s); len(d.Events) > 0 {
			return d
		}
	}
}

func readUpToDrop(t *testing.T, s *Subscription) {
	t.Helper()
	for _, want := range []string{"1", "ddl"} {
		if got := summary(t, nonEmpty(t, s).Txn); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}
