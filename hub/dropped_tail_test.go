package hub

import (
	"context"
	"errors"
	"testing"
	"time"

	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// dropBatch is the DROP TABLE of t that `MoveTables complete` writes at
// the source, at position n.
func dropBatch(n int) []*binlogdatapb.VEvent {
	return []*binlogdatapb.VEvent{s0.Pos(pos(n)), s0.DDL(100, "drop table if exists `vt_customer`.`t`")}
}

// wantDropped reads s up to its end and requires the upstream.TablesDroppedError.
func wantDropped(t *testing.T, what string, s *Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		d, err := s.Next(ctx)
		if err != nil {
			var td *upstream.TablesDroppedError
			if !errors.As(err, &td) || len(td.Tables) != 1 || td.Tables[0] != "t" {
				t.Fatalf("%s: %v, want the upstream.TablesDroppedError of t", what, err)
			}
			return
		}
		if len(d.Events) > 0 {
			t.Fatalf("%s: %q after the DROP, want the end of the stream", what, summary(t, d.Txn))
		}
	}
}

// DESIGN §4.1 rule 9: when the tail of an on_gap fail stream sees its
// tables dropped it ends, and so does every reader following it, at the
// DROP — a follower must not read on privately (silence: a VStream of a
// table that is gone sends nothing, ever). A reader parked
// at the head (a poller between pages, an idle WebSocket) is woken to
// read the end.
func TestTailEndsEveryFollowerWhenTablesDropped(t *testing.T) {
	e := newEnvSource(t, nil, WithTails(TailOptions{RingBytes: 1 << 20, RingEntries: 100, StartWait: 5 * time.Second, Idle: time.Minute}))
	e.def.OnGap = streams.OnGapFail
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(10))}}})
	first := e.open(t, From{})
	samePos(t, "first delivery", next(t, first).VGtid, pos(10))
	call := e.fake.Call(t, 0)
	a, b := e.open(t, From{}), e.open(t, From{})
	for _, s := range []*Subscription{a, b} {
		samePos(t, "first delivery", next(t, s).VGtid, pos(10))
	}
	wake := make(chan struct{})
	_, parked := b.Park(func() { close(wake) })
	if !parked {
		t.Fatal("a reader at the tail's head did not park")
	}
	call.Answer(t, fakevtgate.Script{Open: true, Batches: append(txns(11, 12), dropBatch(13))})
	same(t, "reader a", read(t, a, 2), []string{"11@0:11", "12@0:12"})
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the parked reader was not woken")
	}
	same(t, "reader b", read(t, b, 2), []string{"11@0:11", "12@0:12"})
	same(t, "first reader", read(t, first, 2), []string{"11@0:11", "12@0:12"})
	for name, s := range map[string]*Subscription{"a": a, "b": b, "first": first} {
		wantDropped(t, "reader "+name, s)
	}
	// A reader that only polls (TryNext) gets it too.
	if _, _, err := first.TryNext(context.Background()); !errors.As(err, new(*upstream.TablesDroppedError)) {
		t.Errorf("TryNext after the end: %v, want the upstream.TablesDroppedError", err)
	}
	if n := e.fake.Calls(); n != 1 {
		t.Errorf("%d VStream calls, want the tail's only (no reader reads on past the DROP)", n)
	}
}

// refusal is vttablet refusing a position before the DROP of t, as vtgate
// passes it on (source/tablemissing_test.go has the whole text).
func refusal() error {
	return vterrors.New(vtrpcpb.Code_UNKNOWN, "persistent error in vstream for customer/0 on tablet zone1-0000000200; giving up: "+
		"stream (at source tablet) error @ (including the GTID we failed to process) 0-1-11: unknown table t in schema\nfailed to build table replication plan for table t\n")
}

// DESIGN §4.1 rule 9: a cursor from before the DROP read where no tail
// holds what followed (after a restart) is refused by vttablet; once
// vtgate confirms the table gone, the refusal is the same gap as the DROP
// seen online, under on_gap: the upstream.TablesDroppedError, or a resync (reason
// tables_dropped) and reading on from the live end — never a retry from
// the refused position.
func TestRefusedPositionTablesDropped(t *testing.T) {
	gone := func(e *env) {
		e.fake.SetResult("show tables like 't'", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Tables_in_customer", "varchar")))
	}
	t.Run("fail", func(t *testing.T) {
		e := newEnv(t)
		gone(e)
		e.def.OnGap = streams.OnGapFail
		e.fake.Push(fakevtgate.Script{Err: refusal()})
		s := e.open(t, From{Token: e.token(t, pos(10))})
		wantDropped(t, "reader from before the DROP", s)
		if n := e.fake.Calls(); n != 1 {
			t.Errorf("%d VStream calls, want 1", n)
		}
	})
	t.Run("resync", func(t *testing.T) {
		e := newEnv(t)
		gone(e)
		e.fake.Push(fakevtgate.Script{Err: refusal()},
			fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(20))}}})
		s := e.open(t, From{Token: e.token(t, pos(10))})
		d := nonEmpty(t, s)
		if len(d.Events) != 1 || d.Events[0].Type != event.TypeResync || member(t, d.Events[0], "reason") != `"tables_dropped"` ||
			member(t, d.Events[0], "tables") != `["t"]` {
			t.Fatalf("first delivery: %q, want a resync notice (tables_dropped)", summary(t, d.Txn))
		}
		samePos(t, "reading on", next(t, s).VGtid, pos(20))
		samePos(t, "reopened at the live end", e.fake.Call(t, 1).Req.Vgtid, fakevtgate.VGtid(ks, "", "current"))
	})
}
