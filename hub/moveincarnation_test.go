package hub

import (
	"context"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// The tables moved out of ks and home again, ks's shards -80 and 80- were
// merged and split again (their binlogs begin anew), and the tables move
// out a second time. A reader on the second -80/80- at 10 must cross the
// second move (at 30), not the first (at 20 on the first -80/80-, whose
// GTIDs read as ahead of the reader's by accident): DESIGN §4 rule 6.
func TestMoveOfAnotherIncarnationIsNotCrossed(t *testing.T) {
	fm := &fakeMover{}
	e := moveEnv(t, fm)
	merge := e.recordMerge(t)
	// The -80/80- serving now are new shards: their primaries began after
	// the merge retired the names.
	later := time.Now().Add(time.Hour)
	e.fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "-80", Alias: "zone1-0000000300", TermStart: later},
		fakevtgate.Tablet{Keyspace: ks, Shard: "80-", Alias: "zone1-0000000301", TermStart: later},
		fakevtgate.Tablet{Keyspace: commerceKs, Shard: "0", Alias: "zone1-0000000302"})

	second := func(n int) string { return position.Shard{GTID: gtid(n), Incarnation: merge.Key}.Text() }
	first := moveOfT()
	again := streams.Move{Journal: "j2", From: ks, To: commerceKs, Tables: []string{"t"},
		Local: map[string]string{"-80": second(30), "80-": second(30)}, Targets: map[string]string{"0": "MariaDB/0-9-50"}}
	fm.mu.Lock()
	fm.moves = []streams.Move{first, again}
	fm.mu.Unlock()
	e.def.Moves = []streams.Move{first, again}

	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		sLo.Txn(100, two(20, 10), field(sLo), row(sLo, "1")), // the first move's cutover, by number
		sLo.Txn(100, two(30, 10), row(sLo, "2")),             // -80 reaches the second's
		sLo.Txn(100, two(31, 10), row(sLo, "3")),             // a reverse copy on -80
		sHi.Txn(100, two(31, 20), field(sHi), row(sHi, "4")),
		sHi.Txn(100, two(31, 30), row(sHi, "5")), // 80- reaches the second's
		sHi.Txn(100, two(31, 31), row(sHi, "6")), // a copy, never read
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-51"), field(c0), row(c0, "7")),
	}})
	from := position.New(position.Shard{Keyspace: ks, Shard: "-80", GTID: gtid(10), Incarnation: merge.Key},
		position.Shard{Keyspace: ks, Shard: "80-", GTID: gtid(10), Incarnation: merge.Key}).VGtid()
	s := e.open(t, From{Token: e.token(t, from)})
	for _, want := range []string{"1", "2", "4", "5"} {
		if got := summary(t, next(t, s).Txn); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	d := next(t, s)
	isMoved(t, d.Txn)
	samePos(t, "after the move", d.VGtid, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-50"))
	if got := summary(t, next(t, s).Txn); got != "7" {
		t.Fatalf("on the target: %q, want 7", got)
	}
	samePos(t, "source request (vtgate sees no incarnation)", e.fake.Call(t, 0).Req.Vgtid, two(10, 10))
}

// A reader that entered ks on shard 0 and crossed a split reads -80 and
// 80- from the journal's positions on: a move out of ks recorded on those
// shards is ahead of it and crossed, though the shards it entered ks on
// are not the move's (DESIGN §4.1 rule 3).
func TestMoveAfterAReshardIsCrossed(t *testing.T) {
	// moveEnv, with the old shard still readable (the cursor passes
	// through) from the start: a topology changed under the reader reads
	// as a reparent and reopens its VStream.
	e := newEnv(t, WithMoveWatch(&fakeMover{moves: []streams.Move{moveOfT()}}))
	e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"})
	e.fake.SetTopology(commerceKs, []string{"0"}, nil)
	e.fake.SetTablets(fakevtgate.Tablet{Keyspace: ks, Shard: "0", Alias: "zone1-0000000100", TermStart: time.Unix(1_700_000_000, 0)},
		fakevtgate.Tablet{Keyspace: ks, Shard: "-80", Alias: "zone1-0000000300"}, fakevtgate.Tablet{Keyspace: ks, Shard: "80-", Alias: "zone1-0000000400"},
		fakevtgate.Tablet{Keyspace: commerceKs, Shard: "0", Alias: "zone1-0000000500"})
	e.def.Keyspace, e.def.Moves = commerceKs, []streams.Move{moveOfT()}
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.JournalTxn(7, []string{"0"}, gtid(11), pos(12), "-80", gtid(5), "80-", gtid(5)),
		sLo.Txn(100, two(6, 5), field(sLo), row(sLo, "2")),
		sLo.Txn(100, two(20, 5), row(sLo, "3")), // -80 reaches the cutover
		sLo.Txn(100, two(21, 5), row(sLo, "8")), // a reverse copy on -80
		sHi.Txn(100, two(21, 20), field(sHi), row(sHi, "4")),
		sHi.Txn(100, two(21, 21), row(sHi, "9")), // a copy, never read
	}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		c0.Txn(100, fakevtgate.VGtid(commerceKs, "0", "MariaDB/0-9-6"), field(c0), row(c0, "5")),
	}})
	s := e.open(t, From{Token: e.token(t, pos(10))})
	for _, want := range []string{"1", "reshard", "2", "3", "4"} {
		if got := summary(t, next(t, s).Txn); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	isMoved(t, next(t, s).Txn)
	if got := summary(t, next(t, s).Txn); got != "5" {
		t.Fatalf("on the target: %q, want 5", got)
	}
}

// A move out of an earlier shard of the name is behind a cursor on a
// later one, whatever their GTIDs say: no gap (the soak's second cycle
// resynced named readers at the next move out). A cursor on the shard
// the move left from, behind its cutover, is one.
func TestCompletedMoveOfAnEarlierIncarnationIsBehind(t *testing.T) {
	e := moveEnv(t, &fakeMover{moves: []streams.Move{moveOfT()}, completed: true})
	merge := e.recordMerge(t)
	later := position.New(position.Shard{Keyspace: ks, Shard: "-80", GTID: gtid(10), Incarnation: merge.Key},
		position.Shard{Keyspace: ks, Shard: "80-", GTID: gtid(10), Incarnation: merge.Key}).VGtid()
	ctx := context.Background()
	if mv, missing, err := e.hub.behindCompletedMove(ctx, e.def, later); err != nil || mv != nil {
		t.Fatalf("cursor on the later -80/80-: behind %v (missing %v, %v), want not", mv, missing, err)
	}
	if mv, missing, err := e.hub.behindCompletedMove(ctx, e.def, two(10, 10)); err != nil || mv == nil || len(missing) != 2 {
		t.Fatalf("cursor on the move's -80/80- behind its cutover: %v, missing %v, %v", mv, missing, err)
	}
}

// recordMerge records the merge of ks's -80 and 80- into 0 at 40 on
// each: the names -80 and 80- are retired, so shards serving under them
// later are of the merge's incarnation.
func (e *env) recordMerge(t *testing.T) *reshard.Journal {
	t.Helper()
	var views []*reshard.Journal
	for _, p := range []string{"-80", "80-"} {
		j, _ := reshard.FromEvent(ks, p, &binlogdatapb.Journal{Id: 4, MigrationType: binlogdatapb.MigrationType_SHARDS,
			LocalPosition: gtid(40), ShardGtids: fakevtgate.VGtid(ks, "0", "MariaDB/0-7-1").ShardGtids,
			Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "-80"}, {Keyspace: ks, Shard: "80-"}}})
		views = append(views, j)
	}
	return e.record(t, views...)
}

// A cursor on shards a reshard created after a move out of the keyspace
// is past that move, though it lacks the move's source shards: a merge
// (or split) after the move is not behind it (the soak's third cycle
// failed every on_gap fail reader at its split: the move out of cycle
// two, on 0, read as a gap for a cursor on the new -80/80-).
func TestCursorOnShardsMadeAfterAMoveIsPastIt(t *testing.T) {
	fm := &fakeMover{completed: true}
	e := moveEnv(t, fm)
	mv := e.recordMoveJournal(t)
	ctx := context.Background()
	for _, p := range []string{"-80", "80-"} {
		j, _ := reshard.FromEvent(ks, p, &binlogdatapb.Journal{Id: 4, MigrationType: binlogdatapb.MigrationType_SHARDS,
			LocalPosition: gtid(40), ShardGtids: fakevtgate.VGtid(ks, "0", "MariaDB/0-7-1").ShardGtids,
			Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "-80"}, {Keyspace: ks, Shard: "80-"}}})
		j.SeenAt = mv.SeenAt.Add(time.Minute)
		if _, err := e.reg.Record(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	m := moveOfT()
	m.Journal = mv.Key
	fm.mu.Lock()
	fm.moves = []streams.Move{m}
	fm.mu.Unlock()
	e.def.Moves = []streams.Move{m}
	e.fake.SetTopology(ks, []string{"0"}, nil)

	merged := fakevtgate.VGtid(ks, "0", "MariaDB/0-7-5")
	if got, missing, err := e.hub.behindCompletedMove(ctx, e.def, merged); err != nil || got != nil {
		t.Fatalf("cursor on the shard merged after the move: behind %v (missing %v, %v), want not", got, missing, err)
	}
	if got, missing, err := e.hub.behindCompletedMove(ctx, e.def, two(10, 10)); err != nil || got == nil || len(missing) != 2 {
		t.Fatalf("cursor on the move's -80/80- behind its cutover: %v, missing %v, %v", got, missing, err)
	}
}
