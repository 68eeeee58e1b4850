package bridge

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// The MoveTables tests move table t from ks (shards -80 and 80-, cut at
// gtid(20) on each) to keyspace "commerce" (one shard, from commerceAt).
const commerceKs = "commerce"

var (
	c0         = fakevtgate.Shard{Keyspace: commerceKs, Name: "0"}
	commerceAt = "MariaDB/0-9-5"
)

// two is a position on ks's two shards.
func two(lo, hi int) *binlogdatapb.VGtid {
	return fakevtgate.VGtid(ks, "-80", gtid(lo), "80-", gtid(hi))
}

func moveOfT() streams.Move {
	return streams.Move{Journal: "j1", From: ks, To: commerceKs, Tables: []string{"t"},
		Local: map[string]string{"-80": gtid(20), "80-": gtid(20)}, Targets: map[string]string{"0": commerceAt}}
}

// fakeMover is the hub's view of the MoveTables watch after a cutover it
// followed: no workflow pending (no transaction is held for a journal
// read), the stream's moves, and whether the workflow is completed (the
// source tables dropped).
type fakeMover struct {
	mu        sync.Mutex
	moves     []streams.Move
	completed bool
}

func (f *fakeMover) Pending(string, []string) bool                           { return false }
func (f *fakeMover) Fresh(context.Context, time.Time) error                  { return nil }
func (f *fakeMover) Sync(context.Context, string, time.Time) error           { return nil }
func (f *fakeMover) Blocked(context.Context, string) (*streams.Block, error) { return nil, nil }

func (f *fakeMover) Moves(context.Context, string) ([]streams.Move, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]streams.Move(nil), f.moves...), nil
}

func (f *fakeMover) Completed(context.Context, string, []string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.completed, nil
}

// complete completes the workflow.
func (f *fakeMover) complete() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = true
}

// moveEnv is a hub following moves of t, the stream's definition already
// moved (keyspace commerce, its move recorded), and a bridger with opts.
func moveEnv(t *testing.T, fm *fakeMover, opts ...Option) *env {
	t.Helper()
	e := build(t, setup{hub: []hub.Option{hub.WithMoveWatch(fm)}, bridge: opts})
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	e.fake.SetTopology(commerceKs, []string{"0"}, nil)
	e.def.Keyspace, e.def.Moves = commerceKs, []streams.Move{moveOfT()}
	return e
}

// isMoved checks that txn is the `moved` notice of moveOfT.
func isMoved(t *testing.T, txn *source.Txn) {
	t.Helper()
	if len(txn.Events) != 1 || txn.Events[0].Type != event.TypeMoved || member(t, txn.Events[0], "from") != `"customer"` ||
		member(t, txn.Events[0], "to") != `"commerce"` {
		t.Fatalf("got %q, want the moved notice", summary(t, txn))
	}
}

// recordMoveJournal records the MoveTables journal of moveOfT as the
// Mover does (one row per source primary) and returns it complete.
func (e *env) recordMoveJournal(t *testing.T) *reshard.Journal {
	t.Helper()
	var views []*reshard.Journal
	for _, shard := range []string{"-80", "80-"} {
		j, ok := reshard.FromTablesJournal(ks, shard, &binlogdatapb.Journal{Id: 9, MigrationType: binlogdatapb.MigrationType_TABLES,
			Tables: []string{"t"}, LocalPosition: gtid(20), ShardGtids: fakevtgate.VGtid(commerceKs, "0", commerceAt).ShardGtids,
			Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "-80"}, {Keyspace: ks, Shard: "80-"}}})
		if !ok {
			t.Fatal("not a MoveTables journal")
		}
		views = append(views, j)
	}
	return e.record(t, views...)
}

// DESIGN §4.1 rule 5: a named subscriber away across the switch is
// bridged while the source tables exist: its spool holds the source's
// transactions up to the cutover on every shard, no copy; after
// `complete` it gets the spool, then the target from the journal's
// positions.
func TestMoveBridge(t *testing.T) {
	ctx := context.Background()
	fm := &fakeMover{moves: []streams.Move{moveOfT()}}
	e := moveEnv(t, fm)
	j := e.recordMoveJournal(t)
	e.ack(t, "alice", two(10, 10))
	e.ack(t, "bob", two(20, 20)) // at the cutover
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		sLo.Txn(100, two(11, 10), field(sLo), row(sLo, "1")),
		sLo.Txn(100, two(20, 10), row(sLo, "2")),
		sLo.Txn(100, two(21, 10), row(sLo, "3")), // a copy
		sHi.Txn(100, two(21, 11), field(sHi), row(sHi, "4")),
		sHi.Txn(100, two(21, 20), row(sHi, "5")),
		sHi.Txn(100, two(21, 21), row(sHi, "6")), // a copy
	}})
	st, err := e.br.Subscriber(ctx, e.def, "alice", j)
	if err != nil || st.State != "done" {
		t.Fatalf("Subscriber: %+v, %v", st, err)
	}
	if req := e.fake.Call(t, 0).Req; req.Flags.GetStopOnReshard() || req.Vgtid.ShardGtids[0].Keyspace != ks {
		t.Errorf("capture request %v", req)
	}
	<-e.fake.Call(t, 0).Done() // the capture ended at the cutover
	if st, err := e.br.Subscriber(ctx, e.def, "bob", j); err != nil || st.State != "not_needed" {
		t.Fatalf("Subscriber at the cutover: %+v, %v", st, err)
	}
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 1 {
		t.Fatalf("alice: %+v, %v", sub, err)
	}
	if need, why := e.br.NeedsOldShards(sub, j); need {
		t.Errorf("still needs the source after bridging: %s", why)
	}
	got := spooled(t, e, sub.Bridges[0].Log)
	if len(got) != 4 || !proto.Equal(got[3], two(21, 20)) {
		t.Fatalf("spool holds %v, want the 4 source transactions up to the cutover", got)
	}
	statuses, err := e.br.Statuses(ctx, ks)
	if err != nil || len(statuses) != 1 || statuses[0].State != "done" {
		t.Fatalf("bridge statuses under the source keyspace: %+v, %v", statuses, err)
	}

	// complete: the source tables are gone. Alice returns.
	fm.complete()
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "7")),
	}})
	s := e.open(t, hub.From{Subscriber: "alice"})
	var notice *hub.Delivery
	for _, want := range []string{"1", "2", "4", "5", "moved", "7"} {
		d := next(t, s)
		if got := summary(t, d.Txn); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		if want == "moved" {
			isMoved(t, d.Txn) // as a reader online across the switch got it
			notice = d
		}
	}
	samePos(t, "after the spool", e.fake.Call(t, 1).Req.Vgtid, fakevtgate.VGtid(commerceKs, "0", commerceAt))
	s.Close()

	// Acked at the notice: alice continues on the target, no second notice.
	e.ack(t, "alice", notice.VGtid)
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "7")),
	}})
	if got := summary(t, next(t, e.open(t, hub.From{Subscriber: "alice"})).Txn); got != "7" {
		t.Fatalf("after acking the notice: %q, want 7", got)
	}
}
