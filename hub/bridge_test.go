package hub

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

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
)

// journalEnd is how the old shard's stream ends under stop_on_reshard:
// writes up to the cutover at gtid(20), the JOURNAL (with a position past
// it, which must not be used), then EOF.
func journalEnd() [][]*binlogdatapb.VEvent {
	return [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(20)),
		s0.JournalTxn(7, []string{"0"}, gtid(20), pos(21), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"),
	}
}

// after5 is a position on the new shards after their first transaction.
var after5 = fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-5")

// liveOnNewShards is the VStream from the journal's targets.
func liveOnNewShards() fakevtgate.Script {
	return fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{sLo.Txn(100, after5, field(sLo), row(sLo, "4"))}}
}

// bridge captures alice's old-shard events (she acked pos(10)) into a
// spool and checks what was recorded.
func bridge(t *testing.T, e *env, j *reshard.Journal) *SubscriberState {
	t.Helper()
	ctx := context.Background()
	st, err := e.hub.BridgeSubscriber(ctx, e.def, "alice", j)
	if err != nil || st.State != "done" {
		t.Fatalf("BridgeSubscriber: %+v, %v", st, err)
	}
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.Bridges) != 1 {
		t.Fatalf("%d bridges recorded", len(sub.Bridges))
	}
	after := &binlogdatapb.VGtid{}
	if err := proto.Unmarshal(sub.Bridges[0].After, after); err != nil {
		t.Fatal(err)
	}
	samePos(t, "bridge continues at", after, targets)
	samePos(t, "acked position", sub.VGtid, pos(10))
	if need, why := e.hub.NeedsOldShards(sub, j); need {
		t.Errorf("still needs the old shards after bridging: %s", why)
	}
	return sub
}

// spooled returns the positions of the spool's entries.
func spooled(t *testing.T, e *env, log string) []*binlogdatapb.VGtid {
	t.Helper()
	entries, err := e.st.ReadLog(context.Background(), log, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []*binlogdatapb.VGtid
	for _, en := range entries {
		txn, err := decodeSpoolEntry(en.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, txn.VGtid)
	}
	return out
}

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
	if st, err := e.hub.BridgeSubscriber(ctx, e.def, "alice", j); err != nil || st.State != "done" {
		t.Fatalf("second BridgeSubscriber: %+v, %v", st, err)
	}
	if st, err := e.hub.BridgeSubscriber(ctx, e.def, "bob", j); err != nil || st.State != "not_needed" {
		t.Fatalf("BridgeSubscriber for a subscriber past the cutover: %+v, %v", st, err)
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1", n)
	}

	// Reshard complete: the old shard is gone. Alice returns.
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	s := e.open(t, From{Subscriber: "alice"})
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
	s = e.open(t, From{Subscriber: "alice"})
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
	next(t, e.open(t, From{Subscriber: "alice"}))
	samePos(t, "after acking past the spool", e.fake.Call(t, 3).Req.Vgtid, after5)
	if st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice"); err != nil || len(st.Bridges) != 0 || len(st.Freed) != 1 {
		t.Fatalf("bridges after acking past: %+v, %v; want none, one freed", st, err)
	}
	if n, err := e.st.LogLen(ctx, log); err != nil || n != 2 {
		t.Fatalf("freed spool holds %d entries (%v), want its 2 until the grace passed", n, err)
	}
	e.hub.spoolGrace = 0
	e.fake.Push(liveOnNewShards())
	next(t, e.open(t, From{Subscriber: "alice"}))
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
	dead := &BridgeStatus{Journal: j.Key, Stream: e.def.Name, Subscriber: "bob", State: "in_progress", Started: time.Now().UTC()}
	e.hub.saveBridgeStatus(ctx, j.Keyspace, dead)
	if st, err := e.hub.BridgeSubscriber(ctx, e.def, "bob", j); err != nil || st.State != "not_needed" {
		t.Fatalf("bridging again: %+v, %v", st, err)
	}
	statuses, err := e.hub.BridgeStatuses(ctx, j.Keyspace)
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 1 || statuses[0].State != "not_needed" || statuses[0].Finished.IsZero() {
		t.Fatalf("statuses after bridging again: %+v, want bob's not_needed", statuses)
	}
	// A subscriber that never had a status gets none.
	e.ack(t, "carol", pos(22))
	if _, err := e.hub.BridgeSubscriber(ctx, e.def, "carol", j); err != nil {
		t.Fatal(err)
	}
	if statuses, _ := e.hub.BridgeStatuses(ctx, j.Keyspace); len(statuses) != 1 {
		t.Fatalf("%d statuses, want only bob's", len(statuses))
	}
}

// A bridge VStream that goes silent (vtgate searching for the old shard's
// primary while the switch settles) is reopened from the last transaction
// captured: nothing missed, nothing spooled twice.
func TestBridgeReopensStalledStream(t *testing.T) {
	e := newEnv(t)
	e.hub.bridgeStall = 100 * time.Millisecond
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(
		fakevtgate.Script{Open: true}, // silent from the start
		fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}},
		fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{s0.Txn(100, pos(13), field(s0), row(s0, "2"))}, journalEnd()...)},
	)
	sub := bridge(t, e, j)
	for i, want := range []*binlogdatapb.VGtid{pos(10), pos(10), pos(11)} {
		samePos(t, "bridge request", e.fake.Call(t, i).Req.Vgtid, want)
	}
	for i := range 2 {
		<-e.fake.Call(t, i).Done() // the stalled streams were cancelled
	}
	if got := spooled(t, e, sub.Bridges[0].Log); len(got) != 2 || !proto.Equal(got[0], pos(11)) || !proto.Equal(got[1], pos(13)) {
		t.Fatalf("spool holds %v, want the transactions at 11 and 13", got)
	}
}

// A bridge VStream that sends only vtgate's heartbeats (vtgate searching
// for the old shard's primary, or a shard that will never send its journal
// again) is not progressing: it is reopened once it has delivered nothing
// else for the stall window, however often heartbeats come.
func TestBridgeReopensStreamSendingOnlyHeartbeats(t *testing.T) {
	e := newEnv(t)
	e.hub.bridgeStall = 300 * time.Millisecond
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}})
	// Heartbeats every 50 ms on the first stream until it is cancelled
	// (or for 10 s: a bridge that takes them for progress never is).
	fed := make(chan bool, 1)
	go func() {
		call := e.fake.Call(t, 0)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		giveUp := time.After(10 * time.Second)
		for {
			select {
			case <-call.Done():
				fed <- true
				return
			case <-giveUp:
				fed <- false
				return
			case <-tick.C:
				call.TryAnswer(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{fakevtgate.Heartbeat()}}})
			}
		}
	}()
	e.fake.Push(fakevtgate.Script{Batches: journalEnd()})
	sub := bridge(t, e, j)
	if !<-fed {
		t.Fatal("a stream sending only heartbeats was never reopened")
	}
	samePos(t, "the reopened bridge stream", e.fake.Call(t, 1).Req.Vgtid, pos(11))
	if got := spooled(t, e, sub.Bridges[0].Log); len(got) != 1 || !proto.Equal(got[0], pos(11)) {
		t.Fatalf("spool holds %v, want the transaction at 11 once", got)
	}
}

// A bridge over the spool bound fails, leaves the subscriber as it was and
// keeps nothing in the store.
func TestBridgeSpoolLimit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.hub.spoolMaxEvents = 1
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1"), row(s0, "2")),
	}})
	st, err := e.hub.BridgeSubscriber(ctx, e.def, "alice", j)
	if !errors.Is(err, ErrSpoolFull) || st.State != "failed" {
		t.Fatalf("BridgeSubscriber: %+v, %v; want ErrSpoolFull", st, err)
	}
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 0 || !proto.Equal(sub.VGtid, pos(10)) {
		t.Fatalf("subscriber after a failed bridge: %+v, %v", sub, err)
	}
	statuses, err := e.hub.BridgeStatuses(ctx, ks)
	if err != nil || len(statuses) != 1 || statuses[0].State != "failed" {
		t.Fatalf("bridge statuses %+v, %v", statuses, err)
	}
	if need, _ := e.hub.NeedsOldShards(sub, j); !need {
		t.Error("a subscriber whose bridge failed does not need the old shards")
	}
}

// An ack never moves a cursor back: a position strictly behind the stored
// one (same shards, GTID-set order, not text) is ignored; anything else,
// including a position on other shards, is stored.
func TestAckNeverMovesBack(t *testing.T) {
	two := func(a, b int) *binlogdatapb.VGtid {
		return fakevtgate.VGtid(ks, "-80", gtid(a), "80-", gtid(b))
	}
	e := newEnv(t)
	for _, tc := range []struct {
		name      string
		ack, want *binlogdatapb.VGtid
	}{
		{"first", pos(10), pos(10)},
		{"behind, although after as text", pos(9), pos(10)},
		{"repeated", pos(10), pos(10)},
		{"ahead", pos(11), pos(11)},
		{"other shards (a reshard)", two(1, 5), two(1, 5)},
		{"behind on one shard", two(1, 4), two(1, 5)},
		{"ahead on one shard, behind on the other", two(2, 4), two(2, 4)},
	} {
		if got := e.ack(t, "alice", tc.ack); !proto.Equal(got, tc.want) {
			t.Errorf("%s: ack %v stored %v, want %v", tc.name, tc.ack, got, tc.want)
		}
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
		s := e.open(t, From{Subscriber: "alice"})
		if d := next(t, s); summary(t, d.Txn) != "2" {
			t.Fatalf("after acking pos 12: %q (%d events), want the spooled transaction 2", summary(t, d.Txn), len(d.Events))
		}
	})
	t.Run("token", func(t *testing.T) {
		e := setupBridge(t)
		s := e.open(t, From{Token: e.token(t, pos(12)), Subscriber: "alice"})
		if d := next(t, s); summary(t, d.Txn) != "2" {
			t.Fatalf("from pos 12: %q (%d events), want the spooled transaction 2", summary(t, d.Txn), len(d.Events))
		}
	})
	t.Run("older token", func(t *testing.T) {
		e := setupBridge(t)
		if s, err := e.hub.Open(ctx, e.def, From{Token: e.token(t, pos(5)), Subscriber: "alice"}); err == nil {
			s.Close()
		}
		st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
		if err != nil || !proto.Equal(st.VGtid, pos(10)) || len(st.Bridges) != 1 {
			t.Fatalf("stored state after a request with an older cursor: %v with %d bridges (%v); want pos 10 and the bridge", st.VGtid, len(st.Bridges), err)
		}
	})
}

// A merge's bridge stream that stalls between the old shards' journals
// (-80 sent its journal, 80- is still on its way) is reopened with -80
// before its journal: -80 sends it again and the cutover completes. Were
// it reopened from 80-'s last transaction as vtgate numbered it (-80 past
// its journal), -80 would never send its journal again and vtgate would
// wait for it forever: the bridge would hang until its timeout.
func TestBridgeMergeReopensBetweenJournals(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.hub.bridgeStall = 200 * time.Millisecond
	sHi := fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	parts := []string{"-80", "80-"}
	journal := func(shard, local string) *binlogdatapb.Journal {
		return &binlogdatapb.Journal{Id: 9, MigrationType: binlogdatapb.MigrationType_SHARDS, LocalPosition: local,
			ShardGtids:   pos(50).ShardGtids,
			Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "-80"}, {Keyspace: ks, Shard: "80-"}}}
	}
	lo, _ := reshard.FromEvent(ks, "-80", journal("-80", "MariaDB/0-2-12"))
	hi, _ := reshard.FromEvent(ks, "80-", journal("80-", "MariaDB/0-3-12"))
	j := e.record(t, lo, hi)
	e.ack(t, "alice", mergePos(10, 10))
	e.fake.Push(
		fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
			sLo.Txn(100, mergePos(11, 10), field(sLo), row(sLo, "1")),
			sLo.JournalTxn(9, parts, "MariaDB/0-2-12", mergePos(13, 10), "0", gtid(50)),
			sHi.Txn(100, mergePos(13, 11), field(sHi), row(sHi, "2")),
		}},
		fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
			sLo.JournalTxn(9, parts, "MariaDB/0-2-12", mergePos(13, 11), "0", gtid(50)),
			sHi.Txn(100, mergePos(13, 12), field(sHi), row(sHi, "3")),
			sHi.JournalTxn(9, parts, "MariaDB/0-3-12", mergePos(13, 13), "0", gtid(50)),
		}},
	)
	st, err := e.hub.BridgeSubscriber(ctx, e.def, "alice", j)
	if err != nil || st.State != "done" {
		t.Fatalf("BridgeSubscriber: %+v, %v", st, err)
	}
	samePos(t, "the reopened bridge stream", e.fake.Call(t, 1).Req.Vgtid, mergePos(12, 11))
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 1 {
		t.Fatalf("alice after the bridge: %+v, %v", sub, err)
	}
	var got []string
	entries, err := e.st.ReadLog(ctx, sub.Bridges[0].Log, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		txn, err := decodeSpoolEntry(en.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, summary(t, txn))
	}
	if strings.Join(got, " ") != "1 2 3" {
		t.Fatalf("spool %v, want rows 1 2 3 once each", got)
	}
	after := &binlogdatapb.VGtid{}
	if err := proto.Unmarshal(sub.Bridges[0].After, after); err != nil {
		t.Fatal(err)
	}
	samePos(t, "after the bridge", after, pos(50))
}

// A bridge whose stream fails for good (the old shard deleted by
// `Reshard complete` before the bridge read it) fails at once with that
// error: it is not taken for a stalled stream and reopened in a loop.
func TestBridgeFailsOnAPermanentError(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.hub.bridgeTimeout = 3 * time.Second
	j := e.recordJournal(t)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_FAILED_PRECONDITION,
		"failed to determine if keyspace customer has been resharded: shard provided in VGTID, 0, not found in the customer keyspace")})
	st, err := e.hub.BridgeSubscriber(ctx, e.def, "alice", j)
	if err == nil || st.State != "failed" || !strings.Contains(st.Error, "not found in the customer keyspace") {
		t.Fatalf("BridgeSubscriber: %+v, %v; want failed with vtgate's error", st, err)
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1", n)
	}
}
