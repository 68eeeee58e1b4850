package hub

import (
	"context"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// After the store lost data, a named subscriber without a stored cursor is
// told so (resync, reason store_lost) and gets a fresh snapshot, rather
// than starting silently at "now"; one with a cursor resumes as ever; past
// the window a new subscriber starts at the stream's start again.
func TestLostCursorResync(t *testing.T) {
	live := fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}}
	lostAt := time.Now().Add(-time.Minute)
	loss := WithStoreLoss(func() time.Time { return lostAt }, time.Hour)

	t.Run("no cursor", func(t *testing.T) {
		e := newEnv(t, loss)
		e.fake.Push(live)
		s := e.open(t, From{Subscriber: "carol"})
		d := next(t, s)
		if len(d.Events) != 1 || d.Events[0].Type != event.TypeResync {
			t.Fatalf("first delivery %q, want a resync", summary(t, d.Txn))
		}
		if js := string(d.Events[0].AppendJSON(nil, "")); !strings.Contains(js, `"reason":"store_lost"`) || !strings.Contains(js, `"subscriber":"carol"`) {
			t.Fatalf("resync event %s, want reason store_lost naming the subscriber", js)
		}
		next(t, s)
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, source.SnapshotPosition(ks))
	})
	t.Run("stored cursor", func(t *testing.T) {
		e := newEnv(t, loss)
		e.ack(t, "alice", pos(10))
		e.fake.Push(live)
		if d := next(t, e.open(t, From{Subscriber: "alice"})); summary(t, d.Txn) != "1" {
			t.Fatalf("delivery %q", summary(t, d.Txn))
		}
		samePos(t, "request", e.fake.Call(t, 0).Req.Vgtid, pos(10))
	})
	// A cursor on shards that are gone, with no journal to continue it:
	// after a loss the journal may have been lost with the data.
	for name, c := range map[string]struct {
		opts []Option
		want string
	}{"shards gone": {nil, `"shards_gone"`}, "shards gone after a loss": {[]Option{loss}, `"store_lost"`}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, c.opts...)
			e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
			d := next(t, e.open(t, From{Token: e.token(t, pos(10))}))
			if len(d.Events) != 1 || d.Events[0].Type != event.TypeResync || member(t, d.Events[0], "reason") != c.want {
				t.Fatalf("first delivery %s, want a resync with reason %s", d.Events[0].AppendJSON(nil, ""), c.want)
			}
		})
	}
	t.Run("past the window", func(t *testing.T) {
		e := newEnv(t, WithStoreLoss(func() time.Time { return time.Now().Add(-2 * time.Hour) }, time.Hour))
		e.fake.Push(fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(10))}}}, live)
		e.open(t, From{Subscriber: "bob"})
		samePos(t, "resolving request", e.fake.Call(t, 0).Req.Vgtid, source.NowPosition(ks))
	})
}

// Restore writes back what this replica stored, never behind what the
// store has, and only for streams that exist.
func TestCursorsRestore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.hub.Cursors()
	e.ack(t, "alice", pos(10))
	e.ack(t, "bob", pos(12))
	if _, err := c.Ack(ctx, "gone", "dave", pos(3)); err != nil {
		t.Fatal(err)
	}
	e.ack(t, "erin", pos(4))
	if err := c.Delete(ctx, e.def.Name, "erin"); err != nil {
		t.Fatal(err)
	}
	// The data is lost; another replica restores alice further on first.
	for _, stream := range []string{e.def.Name, "gone"} {
		recs, _ := e.st.List(ctx, cursorNS(stream))
		for _, r := range recs {
			e.st.Delete(ctx, cursorNS(stream), r.Key)
		}
	}
	if _, err := NewCursors(e.st).Ack(ctx, e.def.Name, "alice", pos(15)); err != nil {
		t.Fatal(err)
	}
	r, err := c.Restore(ctx, func(stream string) bool { return stream == e.def.Name })
	if err != nil {
		t.Fatal(err)
	}
	if r.Written != 1 || r.Current != 1 || len(r.Skipped) != 1 || r.Skipped[0] != "gone/dave" || r.Incomplete {
		t.Fatalf("Restore = %+v", r)
	}
	for sub, want := range map[string]*binlogdatapb.VGtid{"alice": pos(15), "bob": pos(12)} {
		st, err := c.Get(ctx, e.def.Name, sub)
		if err != nil || !position.Of(st.VGtid).Identical(position.Of(want)) {
			t.Fatalf("%s after Restore: %v, %v; want %v", sub, st, err, want)
		}
	}
	if _, err := c.Get(ctx, e.def.Name, "erin"); err == nil {
		t.Fatal("a deleted subscriber was restored")
	}
}
