package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Where Open starts: the token, else the subscriber's stored cursor, else
// the stream's start.
func TestOpenPosition(t *testing.T) {
	live := fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}}

	t.Run("token", func(t *testing.T) {
		e := newEnv(t)
		e.fake.Push(live)
		s := e.open(t, From{Token: e.token(t, pos(10))})
		d := next(t, s)
		if summary(t, d.Txn) != "1" || d.Cursor != e.token(t, pos(11)) {
			t.Fatalf("delivery %q with cursor for %v", summary(t, d.Txn), d.VGtid)
		}
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, pos(10))
		if o := e.lastOutcome(); o != reshard.Passthrough {
			t.Errorf("outcome %q", o)
		}
	})
	t.Run("subscriber", func(t *testing.T) {
		e := newEnv(t)
		e.ack(t, "alice", pos(10))
		e.fake.Push(live)
		s := e.open(t, From{Subscriber: "alice"})
		if c, err := s.Cursor(context.Background()); err != nil || c != e.token(t, pos(10)) {
			t.Fatalf("cursor before the first delivery %q, %v", c, err)
		}
		next(t, s)
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, pos(10))
	})
	t.Run("token wins over subscriber", func(t *testing.T) {
		e := newEnv(t)
		e.ack(t, "alice", pos(5))
		e.fake.Push(live)
		next(t, e.open(t, From{Token: e.token(t, pos(10)), Subscriber: "alice"}))
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, pos(10))
	})
	t.Run("new subscriber", func(t *testing.T) {
		e := newEnv(t)
		// The stream starts at "now", resolved into real positions first
		// (see TestOpenFromNowResolvesPosition).
		e.fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(10))}}}, live)
		s := e.open(t, From{Subscriber: "bob"})
		samePos(t, "resolving request", e.fake.Call(t, 0).Req.Vgtid, source.NowPosition(ks))
		if d := next(t, s); len(d.Events) != 0 || d.Cursor != e.token(t, pos(10)) {
			t.Fatalf("first delivery %q with cursor for %v", summary(t, d.Txn), d.VGtid)
		}
		next(t, s)
		samePos(t, "request", e.fake.Call(t, 1).Req.Vgtid, pos(10))
	})
	t.Run("neither, snapshot stream", func(t *testing.T) {
		e := newEnv(t)
		e.def.Start = streams.StartSnapshot
		e.fake.Push(live)
		s := e.open(t, From{})
		if s.CaughtUp() {
			t.Error("a stream starting with a copy phase is caught up")
		}
		next(t, s)
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, source.SnapshotPosition(ks))
	})
	t.Run("foreign token", func(t *testing.T) {
		e := newEnv(t)
		other := *e.def
		other.Keyspace = "commerce"
		tok, err := e.hub.Token(context.Background(), &other, pos(10))
		if err != nil {
			t.Fatal(err)
		}
		var ce *CursorError
		if _, err := e.hub.Open(context.Background(), e.def, From{Token: tok}); !errors.As(err, &ce) {
			t.Fatalf("Open with another stream's token: %v, want a CursorError", err)
		}
	})
}

// A pull client polling with next_cursor keeps one VStream: the parked
// subscription is picked up by the next request with that cursor.
func TestParkedSubscriptionReused(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.Txn(100, pos(12), row(s0, "2")),
	}})
	s := e.open(t, From{Token: e.token(t, pos(10))})
	d := next(t, s)
	e.hub.Park(s)
	if n := e.hub.Parked(); n != 1 {
		t.Fatalf("%d parked", n)
	}

	again := e.open(t, From{Token: d.Cursor})
	if again != s || e.hub.Parked() != 0 {
		t.Fatalf("the parked subscription was not reused (parked: %d)", e.hub.Parked())
	}
	if d := next(t, again); summary(t, d.Txn) != "2" {
		t.Fatalf("after reuse: %q, want 2", summary(t, d.Txn))
	}
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d VStream calls, want 1", n)
	}

	// Parked too long: closed, its VStream cancelled, and the next request
	// opens a new one.
	e.hub.parkTTL = time.Millisecond
	e.hub.Park(again)
	<-e.fake.Call(t, 0).Done()
	if n := e.hub.Parked(); n != 0 {
		t.Fatalf("%d parked after the TTL", n)
	}
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(13), field(s0), row(s0, "3"))}})
	fresh := e.open(t, From{Token: e.token(t, pos(12))})
	if fresh == again {
		t.Fatal("a closed subscription was handed out")
	}
	next(t, fresh)
	samePos(t, "new request", e.fake.Call(t, 1).Req.Vgtid, pos(12))
}

// Pollers in step with the tail stand at the same cursor after each page:
// every one of them is parked and picked up again, none opened anew.
func TestParkedManyAtOneCursor(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 11)})
	const n = 3
	cursor := e.token(t, pos(11))
	var subs []*Subscription
	for range n {
		s := e.open(t, From{Token: e.token(t, pos(10))})
		if d := next(t, s); d.Cursor != cursor {
			t.Fatalf("cursor %q, want %q", d.Cursor, cursor)
		}
		subs = append(subs, s)
	}
	for _, s := range subs {
		e.hub.Park(s)
	}
	if got := e.hub.Parked(); got != n {
		t.Fatalf("%d parked, want %d", got, n)
	}
	var again []*Subscription
	for range n {
		s := e.open(t, From{Token: cursor})
		if !slices.Contains(subs, s) || slices.Contains(again, s) {
			t.Fatal("a request at the shared cursor got a new or a repeated subscription")
		}
		again = append(again, s)
	}
	if got := e.hub.Parked(); got != 0 {
		t.Fatalf("%d parked after every one was taken", got)
	}
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(12, 12)})
	for i, s := range again {
		same(t, fmt.Sprintf("reader %d after reuse", i), read(t, s, 1), want(12))
	}
	if calls := e.fake.Calls(); calls != 1 {
		t.Fatalf("%d VStream calls, want the tail's only", calls)
	}
	// The next request at that cursor finds none parked: it joins anew.
	if s := e.open(t, From{Token: cursor}); slices.Contains(subs, s) {
		t.Fatal("a subscription in use was handed out again")
	}
}

// Of subscriptions parked at one cursor with VStreams of their own (a
// catch-up each: a dump thread each on the primary), only the newest is
// kept.
func TestParkedPrivateOnePerCursor(t *testing.T) {
	e := newEnv(t)
	var subs []*Subscription
	var cursor string
	for range 2 {
		e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
			s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		}})
		s := e.open(t, From{Token: e.token(t, pos(10))})
		cursor = next(t, s).Cursor
		subs = append(subs, s)
	}
	e.hub.Park(subs[0])
	e.hub.Park(subs[1])
	if got := e.hub.Parked(); got != 1 {
		t.Fatalf("%d parked, want 1", got)
	}
	<-e.fake.Call(t, 0).Done() // the older one's VStream ended
	if s := e.open(t, From{Token: cursor}); s != subs[1] {
		t.Fatal("the newest parked subscription was not the one handed out")
	}
}

// Rebuild decisions end to end (DESIGN §4 rule 4): topology from vtgate,
// journals from the registry, the VStream opened where the decision says.
func TestOpenRebuild(t *testing.T) {
	t.Run("passthrough while the old shard is readable", func(t *testing.T) {
		e := newEnv(t)
		e.recordJournal(t)
		e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"})
		e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}})
		s := e.open(t, From{Token: e.token(t, pos(10))})
		if d := next(t, s); summary(t, d.Txn) != "1" {
			t.Fatalf("first delivery %q", summary(t, d.Txn))
		}
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, pos(10))
		if o := e.lastOutcome(); o != reshard.Passthrough {
			t.Errorf("outcome %q", o)
		}
	})

	t.Run("exact", func(t *testing.T) {
		e := newEnv(t)
		e.recordJournal(t)
		e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
		// The cursor of the reshard event itself: past the journal on 0.
		s := e.open(t, From{Token: e.token(t, pos(21))})
		d := next(t, s)
		if len(d.Events) != 1 || d.Events[0].Type != event.TypeReshard ||
			member(t, d.Events[0], "from") != `["0"]` || member(t, d.Events[0], "to") != `["-80","80-"]` {
			t.Fatalf("first delivery %s, want the reshard notice", d.Events[0].AppendJSON(nil, ""))
		}
		if d.Cursor != e.token(t, targets) {
			t.Errorf("notice cursor is for %v, want the rewritten position", d.VGtid)
		}
		if n := e.fake.Calls(); n != 0 {
			t.Fatalf("VStream opened before the notice was read (%d calls)", n)
		}
		e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
			sLo.Txn(100, fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-5"), field(sLo), row(sLo, "1"))}})
		next(t, s)
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, targets)
		if o := e.lastOutcome(); o != reshard.Exact {
			t.Errorf("outcome %q", o)
		}
	})

	t.Run("resync", func(t *testing.T) {
		e := newEnv(t)
		e.recordJournal(t)
		e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
		// Behind the cutover and the old shard is gone: the events in
		// between are lost.
		s := e.open(t, From{Token: e.token(t, pos(10))})
		d := next(t, s)
		if len(d.Events) != 1 || d.Events[0].Type != event.TypeResync || member(t, d.Events[0], "missing") != `["customer/0"]` {
			t.Fatalf("first delivery %s, want resync", d.Events[0].AppendJSON(nil, ""))
		}
		if n := e.fake.Calls(); n != 0 {
			t.Fatalf("VStream opened before the resync notice was read (%d calls)", n)
		}
		e.fake.Push(fakevtgate.Script{Open: true})
		if _, ok, err := s.TryNext(context.Background()); ok || err != nil { // opens the VStream
			t.Fatalf("TryNext: %v, %v", ok, err)
		}
		samePos(t, "request (a copy phase)", e.fake.Call(t, 0).Req.Vgtid, source.SnapshotPosition(ks))
		if o := e.lastOutcome(); o != reshard.Resync {
			t.Errorf("outcome %q", o)
		}
	})

	t.Run("on_gap fail", func(t *testing.T) {
		e := newEnv(t)
		e.def.OnGap = streams.OnGapFail
		e.recordJournal(t)
		e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
		_, err := e.hub.Open(context.Background(), e.def, From{Token: e.token(t, pos(10))})
		var gap *reshard.GapError
		if !errors.As(err, &gap) || len(gap.Missing) != 1 || gap.Missing[0] != "customer/0" {
			t.Fatalf("Open: %v, want a GapError naming customer/0", err)
		}
		if o := e.lastOutcome(); o != reshard.Failed || e.fake.Calls() != 0 {
			t.Errorf("outcome %q, %d VStream calls", o, e.fake.Calls())
		}
	})
}

// A stream from "now" starts at a real position on every shard: vtgate's
// "current" is resolved first (heartbeats and VGTIDs in which some shard
// still says "current" do not count), and the first delivery carries it, so
// a client has a cursor before any row and never one that means "a later
// now".
func TestOpenFromNowResolvesPosition(t *testing.T) {
	e := newEnv(t)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	hi := fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	partial := fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-5", "80-", "current")
	now := fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-9")
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		{fakevtgate.Heartbeat()},
		sLo.Txn(100, partial),
		hi.Txn(100, now),
	}})
	s := e.open(t, From{Subscriber: "new"})
	resolve := e.fake.Call(t, 0)
	samePos(t, "resolving request", resolve.Req.Vgtid, source.NowPosition(ks))
	<-resolve.Done() // closed once resolved

	d := next(t, s)
	if len(d.Events) != 0 || d.Cursor != e.token(t, now) {
		t.Fatalf("first delivery: %d events, cursor for %v; want the resolved position", len(d.Events), d.VGtid)
	}
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		sLo.Txn(100, fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-9"), field(sLo), row(sLo, "1")),
	}})
	if d := next(t, s); summary(t, d.Txn) != "1" {
		t.Fatalf("second delivery %q", summary(t, d.Txn))
	}
	samePos(t, "live request", e.fake.Call(t, 1).Req.Vgtid, now)
}

// A running subscription whose stream loses its shards (it resumes from a
// position on an old shard after Reshard complete deleted it) is rebuilt as
// a reconnect would be: the reshard notice, then the new shards.
func TestShardDeletedUnderSubscription(t *testing.T) {
	e := newEnv(t)
	e.recordJournal(t)
	s := e.open(t, From{Token: e.token(t, pos(10))})
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil) // deleted after Open
	e.fake.Push(fakevtgate.Script{
		Batches: [][]*binlogdatapb.VEvent{
			s0.Txn(100, pos(11), field(s0), row(s0, "1")),
			s0.JournalTxn(7, []string{"0"}, gtid(20), pos(21), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"),
		},
		Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vtgate restarting"),
	}, fakevtgate.Script{Err: vterrors.Errorf(vtrpcpb.Code_FAILED_PRECONDITION,
		"failed to determine if keyspace customer has been resharded: shard provided in VGTID, 0, not found in the customer keyspace")},
		liveOnNewShards())

	for i, want := range []string{"1", "reshard", "reshard", "4"} {
		d := next(t, s)
		if got := summary(t, d.Txn); got != want {
			t.Fatalf("delivery %d: %q, want %q", i, got, want)
		}
		if i == 2 && d.Cursor != e.token(t, targets) {
			t.Fatalf("rebuilt notice has the cursor for %v", d.VGtid)
		}
	}
	// Resumed before the journal (its local position), never past it:
	// from there the old shard would never send it again (DESIGN §4
	// rule 5).
	samePos(t, "resumed at the journal", e.fake.Call(t, 1).Req.Vgtid, pos(20))
	samePos(t, "rebuilt", e.fake.Call(t, 2).Req.Vgtid, targets)
}
