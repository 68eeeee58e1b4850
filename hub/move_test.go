package hub

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// The MoveTables tests move table t from ks (shards -80 and 80-, cut at
// gtid(20) on each) to keyspace "commerce" (one shard, from commerceAt).
const commerceKs = "commerce"

var (
	sHi        = fakevtgate.Shard{Keyspace: ks, Name: "80-"}
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

// fakeMover is the hub's view of the MoveTables watch: a workflow is
// pending while pending is set; every Sync waits for the test to release
// it with a function (run before Sync returns: it may record the move).
type fakeMover struct {
	mu      sync.Mutex
	pending bool
	moves   []streams.Move
	block   *streams.Block
	syncs   []time.Time
	release chan func()
	// completed: the workflow is completed (the source tables dropped).
	completed bool
	// fresh, when set, runs at every Fresh (a routing-rules read): it may
	// set pending.
	fresh  func()
	freshs []time.Time
}

func (f *fakeMover) Fresh(_ context.Context, after time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.freshs = append(f.freshs, after)
	if f.fresh != nil {
		f.fresh()
	}
	return nil
}

func (f *fakeMover) Pending(string, []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending
}

func (f *fakeMover) Sync(ctx context.Context, _ string, after time.Time) error {
	f.mu.Lock()
	f.syncs = append(f.syncs, after)
	f.mu.Unlock()
	if f.release == nil {
		return nil
	}
	select {
	case fn := <-f.release:
		f.mu.Lock()
		defer f.mu.Unlock()
		fn()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeMover) Completed(context.Context, string, []string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.completed, nil
}

func (f *fakeMover) Blocked(context.Context, string) (*streams.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.block, nil
}

func (f *fakeMover) Moves(context.Context, string) ([]streams.Move, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]streams.Move(nil), f.moves...), nil
}

// moveEnv is a hub following moves of t, the stream's definition already
// moved (keyspace commerce, its move recorded).
func moveEnv(t *testing.T, fm *fakeMover) *env {
	t.Helper()
	e := newEnv(t, WithMoveWatch(fm))
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

// DESIGN §4.1 rule 3: a cursor from before the cutover reads the source
// up to the journal position on every source shard, never a reverse copy
// (a transaction on a shard already at its cutover), gets `moved` once and
// continues on the target from the journal's positions.
func TestMoveCrossing(t *testing.T) {
	fm := &fakeMover{moves: []streams.Move{moveOfT()}}
	e := moveEnv(t, fm)
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		sLo.Txn(100, two(11, 10), field(sLo), row(sLo, "1")),
		sLo.Txn(100, two(20, 10), row(sLo, "2")), // -80 reaches its cutover
		sLo.Txn(100, two(21, 10), row(sLo, "3")), // a reverse copy on -80
		sHi.Txn(100, two(21, 11), field(sHi), row(sHi, "4")),
		sHi.Txn(100, two(21, 20), row(sHi, "5")), // 80- reaches its cutover
		sHi.Txn(100, two(21, 21), row(sHi, "6")), // a copy, never read
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "6")),
	}})
	s := e.open(t, From{Token: e.token(t, two(10, 10))})
	for _, want := range []string{"1", "2", "4", "5"} {
		if got := summary(t, next(t, s).Txn); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	d := next(t, s)
	isMoved(t, d.Txn)
	target := fakevtgate.VGtid(commerceKs, "0", commerceAt)
	samePos(t, "after the move", d.VGtid, target)
	if got := summary(t, next(t, s).Txn); got != "6" {
		t.Fatalf("on the target: %q, want 6", got)
	}
	samePos(t, "source request", e.fake.Call(t, 0).Req.Vgtid, two(10, 10))
	samePos(t, "target request", e.fake.Call(t, 1).Req.Vgtid, target)
	<-e.fake.Call(t, 0).Done() // the source VStream ended at the cutover
	if n := e.fake.Calls(); n != 2 {
		t.Fatalf("%d VStream calls, want 2", n)
	}

	// The cursor of the moved notice continues on the target at once.
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "6")),
	}})
	if got := summary(t, next(t, e.open(t, From{Token: d.Cursor})).Txn); got != "6" {
		t.Fatalf("from the moved notice's cursor: %q, want 6", got)
	}
	samePos(t, "request from the notice's cursor", e.fake.Call(t, 2).Req.Vgtid, target)
}

// A cursor at the cutover on every source shard crosses without reading
// the source.
func TestMoveCrossingAtCutover(t *testing.T) {
	e := moveEnv(t, &fakeMover{moves: []streams.Move{moveOfT()}})
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "6")),
	}})
	s := e.open(t, From{Token: e.token(t, two(20, 20))})
	isMoved(t, next(t, s).Txn)
	if got := summary(t, next(t, s).Txn); got != "6" {
		t.Fatalf("on the target: %q, want 6", got)
	}
	samePos(t, "first request", e.fake.Call(t, 0).Req.Vgtid, fakevtgate.VGtid(commerceKs, "0", commerceAt))
}

// DESIGN §4.1 rule 4: while a workflow moves the stream's tables, a source
// transaction is released only after a journal read that began after it
// arrived; meanwhile TryNext reports nothing (it never waits) and Next
// waits. The read that finds the journal makes the reader cross there.
func TestMoveGate(t *testing.T) {
	fm := &fakeMover{pending: true, release: make(chan func(), 1)}
	e := newEnv(t, WithMoveWatch(fm))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.Txn(100, pos(20), row(s0, "2")),
		s0.Txn(100, pos(21), row(s0, "3")), // a reverse copy
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "6")),
	}})
	m := e.hub.up.Open(context.Background(), e.def, pos(10))
	defer m.Close()

	// The first transaction is held for a journal read.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := m.Next(ctx)
	cancel()
	if err == nil {
		t.Fatal("Next delivered a transaction before the journal read")
	}
	tryNext := make(chan bool, 1)
	go func() { _, ok, _ := m.TryNext(); tryNext <- ok }()
	select {
	case ok := <-tryNext:
		if ok {
			t.Fatal("TryNext delivered a transaction before the journal read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("TryNext waits for the journal read")
	}
	if m.Buffered() == 0 {
		t.Error("a held transaction is not counted as buffered")
	}
	fm.release <- func() {} // no journal yet
	txn := nextOf(t, m)
	if got := summary(t, txn); got != "1" {
		t.Fatalf("got %q, want 1", got)
	}
	fm.mu.Lock()
	if len(fm.syncs) != 1 || fm.syncs[0].Before(txn.Received) {
		t.Errorf("journal reads asked for %v; the transaction arrived at %v", fm.syncs, txn.Received)
	}
	fm.mu.Unlock()

	// The read after the second transaction finds the journal (written
	// at gtid 20): that transaction is the source's, the next a copy.
	fm.release <- func() {
		fm.moves = []streams.Move{{Journal: "j1", From: ks, To: commerceKs, Tables: []string{"t"},
			Local: map[string]string{"0": gtid(20)}, Targets: map[string]string{"0": commerceAt}}}
	}
	if got := summary(t, nextOf(t, m)); got != "2" {
		t.Fatalf("got %q, want 2", got)
	}
	isMoved(t, nextOf(t, m))
	// The routing rules name the target's tables too until complete: its
	// transactions pass the same gate.
	fm.release <- func() {}
	if got := summary(t, nextOf(t, m)); got != "6" {
		t.Fatalf("on the target: %q, want 6", got)
	}
	samePos(t, "target request", e.fake.Call(t, 1).Req.Vgtid, fakevtgate.VGtid(commerceKs, "0", commerceAt))
}

func nextOf(t *testing.T, src txnSource) *source.Txn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	txn, err := src.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return txn
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

// DESIGN §4.1 rule 6: an anonymous cursor behind a cutover whose workflow
// is completed gets the stream's on_gap: a resync notice and a snapshot
// of the target, or 409. While the workflow runs it crosses exactly
// (TestMoveCrossing).
func TestMoveGapAfterComplete(t *testing.T) {
	t.Run("resync", func(t *testing.T) {
		e := moveEnv(t, &fakeMover{moves: []streams.Move{moveOfT()}, completed: true})
		e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
			c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "7")),
		}})
		s := e.open(t, From{Token: e.token(t, two(10, 20))})
		d := next(t, s)
		if len(d.Events) != 1 || d.Events[0].Type != event.TypeResync || member(t, d.Events[0], "reason") != `"tables_moved"` ||
			member(t, d.Events[0], "missing") != `["customer/-80"]` {
			t.Fatalf("got %q %s, want a resync notice", summary(t, d.Txn), d.Events[0].AppendJSON(nil, ""))
		}
		next(t, s)
		samePos(t, "snapshot request", e.fake.Call(t, 0).Req.Vgtid, source.SnapshotPosition(commerceKs))
	})
	t.Run("fail", func(t *testing.T) {
		e := moveEnv(t, &fakeMover{moves: []streams.Move{moveOfT()}, completed: true})
		e.def.OnGap = streams.OnGapFail
		_, err := e.hub.Open(context.Background(), e.def, From{Token: e.token(t, two(10, 20))})
		var gap *reshard.GapError
		if !errors.As(err, &gap) || len(gap.Missing) != 1 || gap.Missing[0] != "customer/-80" {
			t.Fatalf("Open: %v, want a GapError naming customer/-80", err)
		}
	})
}

// DESIGN §4.1 rule 4, the gap: a workflow created and switched between two
// polls of the routing rules. The switch's journal reaches the reader as a
// transaction without rows; the next transaction with rows (a reverse
// copy) waits for a routing-rules read begun after it, which names the
// tables, and then for the journal read that recognises it as a copy.
func TestMoveGateAfterTrace(t *testing.T) {
	fm := &fakeMover{release: make(chan func(), 1)}
	e := newEnv(t, WithMoveWatch(fm))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.Txn(100, pos(12)), // another table's transaction: a trace
		s0.Txn(100, pos(13), row(s0, "2")),
		s0.Txn(100, pos(20)),               // the switch's journal, its JOURNAL dropped by vtgate
		s0.Txn(100, pos(21), row(s0, "3")), // a reverse copy
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "6")),
	}})
	m := e.hub.up.Open(context.Background(), e.def, pos(10))
	defer m.Close()

	// No workflow yet: rows pass; one after a trace waits for a fresh
	// read of the rules, which name nothing, and passes without a
	// journal read.
	var got []string
	for len(got) < 2 {
		if s := summary(t, nextOf(t, m)); s != "" {
			got = append(got, s)
		}
	}
	if got[0] != "1" || got[1] != "2" {
		t.Fatalf("got %q, want 1 and 2", got)
	}
	fm.mu.Lock()
	if len(fm.freshs) != 1 || len(fm.syncs) != 0 {
		t.Errorf("%d rules reads, %d journal reads; want 1 and 0", len(fm.freshs), len(fm.syncs))
	}
	// The workflow was created and switched since the last poll: the
	// next rules read names the tables.
	fm.fresh = func() { fm.pending = true }
	fm.mu.Unlock()
	fm.release <- func() {
		fm.moves = []streams.Move{{Journal: "j1", From: ks, To: commerceKs, Tables: []string{"t"},
			Local: map[string]string{"0": gtid(20)}, Targets: map[string]string{"0": commerceAt}}}
	}
	for {
		txn := nextOf(t, m)
		if len(txn.Events) == 0 {
			continue // the journal's transaction
		}
		if summary(t, txn) == "3" {
			t.Fatal("the reverse copy 3 was delivered")
		}
		isMoved(t, txn)
		break
	}
	fm.release <- func() {}
	if got := summary(t, nextOf(t, m)); got != "6" {
		t.Fatalf("on the target: %q, want 6", got)
	}
}
