package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
)

// DESIGN §4 rule 3 end to end: a subscriber away during the cutover is
// bridged while the old shard exists; after it is deleted the subscriber
// gets the spool, then the new shards; acks inside the spool resume inside
// it; acks past it free it.
func TestBridge(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	j := e.recordJournal(t)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"}) // switched, not deleted
	e.ack(t, "alice", pos(10))
	e.ack(t, "bob", pos(21)) // already past the cutover

	e.fake.Push(fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.Txn(100, pos(12)), // filtered out: moves the position only
		s0.Txn(100, pos(13), row(s0, "2"), row(s0, "3")),
	}, journalEnd()...)})
	sub := bridge(t, e, j)
	req := e.fake.Call(t, 0).Req
	samePos(t, "bridge request", req.Vgtid, pos(10))
	if !req.Flags.StopOnReshard {
		t.Error("bridge stream without stop_on_reshard")
	}
	log := sub.Bridges[0].Log
	if got := spooled(t, e, log); len(got) != 2 || !proto.Equal(got[0], pos(11)) || !proto.Equal(got[1], pos(13)) {
		t.Fatalf("spool holds %v, want the transactions at 11 and 13", got)
	}
	if sub.Bridges[0].Events != 3 {
		t.Errorf("bridge counts %d events, want 3", sub.Bridges[0].Events)
	}

	// Idempotent, and not for subscribers past the cutover.
	if st, err := e.br.Subscriber(ctx, e.def, "alice", j); err != nil || st.State != "done" {
		t.Fatalf("second Subscriber: %+v, %v", st, err)
	}
	if st, err := e.br.Subscriber(ctx, e.def, "bob", j); err != nil || st.State != "not_needed" {
		t.Fatalf("Subscriber for a subscriber past the cutover: %+v, %v", st, err)
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1", n)
	}

	// Reshard complete: the old shard is gone. Alice returns.
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	s := e.open(t, hub.From{Subscriber: "alice"})
	var cursors []string
	for _, want := range []string{"1", "2 3"} {
		d := next(t, s)
		if got := summary(t, d.Txn); got != want {
			t.Fatalf("spool replay: %q, want %q", got, want)
		}
		cursors = append(cursors, d.Cursor)
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("VStream opened during the spool replay (%d calls)", n)
	}
	// The reshard event a reader online across the cutover got, once,
	// at the spool's end.
	d := next(t, s)
	if got := summary(t, d.Txn); got != "reshard" || member(t, d.Events[0], "to") != `["-80","80-"]` {
		t.Fatalf("at the spool's end: %q %s, want the reshard notice", got, d.Events[0].AppendJSON(nil, ""))
	}
	samePos(t, "the notice's cursor", d.VGtid, targets)
	e.fake.Push(liveOnNewShards())
	if got := summary(t, next(t, s).Txn); got != "4" {
		t.Fatalf("after the spool: %q, want 4", got)
	}
	req = e.fake.Call(t, 1).Req
	samePos(t, "after the spool", req.Vgtid, targets)
	if req.Flags.StopOnReshard {
		t.Error("live stream with stop_on_reshard")
	}
	if o := e.lastOutcome(); o != reshard.Bridged {
		t.Errorf("outcome %q", o)
	}
	s.Close()

	// Acked the first spooled transaction: resume after it, in the spool.
	first, err := e.hub.Position(ctx, e.def, cursors[0])
	if err != nil {
		t.Fatal(err)
	}
	e.ack(t, "alice", first)
	s = e.open(t, hub.From{Subscriber: "alice"})
	if got := summary(t, next(t, s).Txn); got != "2 3" {
		t.Fatalf("after acking inside the spool: %q, want 2 3", got)
	}
	if got := summary(t, next(t, s).Txn); got != "reshard" {
		t.Fatalf("at the spool's end: %q, want reshard", got)
	}
	e.fake.Push(liveOnNewShards())
	next(t, s)
	samePos(t, "after the spool", e.fake.Call(t, 2).Req.Vgtid, targets)
	s.Close()

	// A late ack never moves the cursor back.
	e.ack(t, "alice", pos(13))
	if got := e.ack(t, "alice", first); !proto.Equal(got, pos(13)) {
		t.Fatalf("late ack moved the cursor back to %v", got)
	}

	// Acked past the spool: it is freed and the cursor used as it is. The
	// spool is kept for the grace (other readers of alice may be on it),
	// then deleted by the next plan.
	e.ack(t, "alice", after5)
	e.fake.Push(liveOnNewShards())
	next(t, e.open(t, hub.From{Subscriber: "alice"}))
	samePos(t, "after acking past the spool", e.fake.Call(t, 3).Req.Vgtid, after5)
	if st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice"); err != nil || len(st.Bridges) != 0 || len(st.Freed) != 1 {
		t.Fatalf("bridges after acking past: %+v, %v; want none, one freed", st, err)
	}
	if n, err := e.st.LogLen(ctx, log); err != nil || n != 2 {
		t.Fatalf("freed spool holds %d entries (%v), want its 2 until the grace passed", n, err)
	}
	e.hub = e.hubWith(t, hub.WithSpoolGrace(0)) // a plan after the grace
	e.fake.Push(liveOnNewShards())
	next(t, e.open(t, hub.From{Subscriber: "alice"}))
	if st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice"); err != nil || len(st.Bridges)+len(st.Freed) != 0 {
		t.Fatalf("bridges after the grace: %+v, %v", st, err)
	}
	if n, err := e.st.LogLen(ctx, log); err != nil || n != 0 {
		t.Fatalf("spool still holds %d entries after the grace (%v)", n, err)
	}
}

// A replica that dies mid-bridge leaves its status in_progress. The
// watcher's next holder bridges again: a subscriber already bridged, or
// one that read across the cutover meanwhile, must not keep showing a
// bridge running forever (the soak waited on one for minutes).
func TestStaleBridgeStatusIsSettled(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	j := e.recordJournal(t)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"})
	e.ack(t, "bob", pos(21)) // read across the cutover while the bridge ran
	dead := &Status{Journal: j.Key, Stream: e.def.Name, Subscriber: "bob", State: "in_progress", Started: time.Now().UTC()}
	e.br.saveStatus(ctx, j.Keyspace, dead)
	if st, err := e.br.Subscriber(ctx, e.def, "bob", j); err != nil || st.State != "not_needed" {
		t.Fatalf("bridging again: %+v, %v", st, err)
	}
	statuses, err := e.br.Statuses(ctx, j.Keyspace)
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 1 || statuses[0].State != "not_needed" || statuses[0].Finished.IsZero() {
		t.Fatalf("statuses after bridging again: %+v, want bob's not_needed", statuses)
	}
	// A subscriber that never had a status gets none.
	e.ack(t, "carol", pos(22))
	if _, err := e.br.Subscriber(ctx, e.def, "carol", j); err != nil {
		t.Fatal(err)
	}
	if statuses, _ := e.br.Statuses(ctx, j.Keyspace); len(statuses) != 1 {
		t.Fatalf("%d statuses, want only bob's", len(statuses))
	}
}

// A bridge over the spool bound fails, leaves the subscriber as it was and
// keeps nothing in the store.
func TestBridgeSpoolLimit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, WithSpoolLimit(1, DefaultSpoolBytes))
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1"), row(s0, "2")),
	}})
	st, err := e.br.Subscriber(ctx, e.def, "alice", j)
	if !errors.Is(err, ErrSpoolFull) || st.State != "failed" {
		t.Fatalf("Subscriber: %+v, %v; want ErrSpoolFull", st, err)
	}
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 0 || !proto.Equal(sub.VGtid, pos(10)) {
		t.Fatalf("subscriber after a failed bridge: %+v, %v", sub, err)
	}
	statuses, err := e.br.Statuses(ctx, ks)
	if err != nil || len(statuses) != 1 || statuses[0].State != "failed" {
		t.Fatalf("bridge statuses %+v, %v", statuses, err)
	}
	if need, _ := e.br.NeedsOldShards(sub, j); !need {
		t.Error("a subscriber whose bridge failed does not need the old shards")
	}
}

// A subscriber may hold a cursor between two spooled transactions: a
// transaction the filter dropped has a position (a pull next_cursor, a
// WebSocket heartbeat cursor) but no spool entry. Acking it, or presenting
// it with the subscriber's name, must resume inside the spool; and an older
// cursor presented with the name must neither free the bridge nor become
// the stored cursor without an ack.
func TestBridgeCursorBetweenSpoolEntries(t *testing.T) {
	ctx := context.Background()
	setupBridge := func(t *testing.T) *env {
		e := newEnv(t)
		j := e.recordJournal(t)
		e.ack(t, "alice", pos(10))
		e.fake.Push(fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{
			s0.Txn(100, pos(11), field(s0), row(s0, "1")),
			s0.Txn(100, pos(12)),
			s0.Txn(100, pos(13), row(s0, "2")),
		}, journalEnd()...)})
		bridge(t, e, j)
		e.fake.SetTopology(ks, []string{"-80", "80-"}, nil) // old shard deleted
		return e
	}
	t.Run("acked", func(t *testing.T) {
		e := setupBridge(t)
		e.ack(t, "alice", pos(12))
		s := e.open(t, hub.From{Subscriber: "alice"})
		if d := next(t, s); summary(t, d.Txn) != "2" {
			t.Fatalf("after acking pos 12: %q (%d events), want the spooled transaction 2", summary(t, d.Txn), len(d.Events))
		}
	})
	t.Run("token", func(t *testing.T) {
		e := setupBridge(t)
		s := e.open(t, hub.From{Token: e.token(t, pos(12)), Subscriber: "alice"})
		if d := next(t, s); summary(t, d.Txn) != "2" {
			t.Fatalf("from pos 12: %q (%d events), want the spooled transaction 2", summary(t, d.Txn), len(d.Events))
		}
	})
	t.Run("older token", func(t *testing.T) {
		e := setupBridge(t)
		if s, err := e.hub.Open(ctx, e.def, hub.From{Token: e.token(t, pos(5)), Subscriber: "alice"}); err == nil {
			s.Close()
		}
		st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
		if err != nil || !proto.Equal(st.VGtid, pos(10)) || len(st.Bridges) != 1 {
			t.Fatalf("stored state after a request with an older cursor: %v with %d bridges (%v); want pos 10 and the bridge", st.VGtid, len(st.Bridges), err)
		}
	})
}

// A bridge whose stream fails for good (the old shard deleted by
// `Reshard complete` before the bridge read it) fails at once with that
// error: it is not taken for a stalled stream and reopened in a loop.
func TestBridgeFailsOnAPermanentError(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, WithTimeout(3*time.Second))
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_FAILED_PRECONDITION,
		"failed to determine if keyspace customer has been resharded: shard provided in VGTID, 0, not found in the customer keyspace")})
	st, err := e.br.Subscriber(ctx, e.def, "alice", j)
	if err == nil || st.State != "failed" || !strings.Contains(st.Error, "not found in the customer keyspace") {
		t.Fatalf("Subscriber: %+v, %v; want failed with vtgate's error", st, err)
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1", n)
	}
}
