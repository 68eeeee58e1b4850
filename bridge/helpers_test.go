package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/txntest"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

const ks = "customer"

var (
	s0  = fakevtgate.Shard{Keyspace: ks, Name: "0"}
	sLo = fakevtgate.Shard{Keyspace: ks, Name: "-80"}
	sHi = fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	// targets is where journal 7 (0 → -80,80-) continues the stream.
	targets = fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5")
	// after5 is a position on the new shards after their first transaction.
	after5 = fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-5")
)

// gtid is the MariaDB position after transaction n on shard 0; pos the
// stream position there.
func gtid(n int) string             { return fmt.Sprintf("MariaDB/0-1-%d", n) }
func pos(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid(ks, "0", gtid(n)) }

// mergePos is a position on the two shards of a merge (-80,80- → 0) after
// transaction lo on -80 and hi on 80-.
func mergePos(lo, hi int) *binlogdatapb.VGtid {
	return fakevtgate.VGtid(ks, "-80", fmt.Sprintf("MariaDB/0-2-%d", lo), "80-", fmt.Sprintf("MariaDB/0-3-%d", hi))
}

func field(s fakevtgate.Shard) *binlogdatapb.VEvent {
	return s.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))
}

// row is a one-row insert into t.
func row(s fakevtgate.Shard, id string) *binlogdatapb.VEvent {
	return s.Insert("t", 100, []string{id, "x" + id})
}

// journalEnd is how the old shard's stream ends under stop_on_reshard:
// writes up to the cutover at gtid(20), the JOURNAL (with a position past
// it, which must not be used), then EOF.
func journalEnd() [][]*binlogdatapb.VEvent {
	return [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(20)),
		s0.JournalTxn(7, []string{"0"}, gtid(20), pos(21), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"),
	}
}

// liveOnNewShards is the VStream from the journal's targets.
func liveOnNewShards() fakevtgate.Script {
	return fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{sLo.Txn(100, after5, field(sLo), row(sLo, "4"))}}
}

// env is a hub and a bridger over one store and a source dialled to a
// fake vtgate, wired as in production (server/server.go): the hub rebuilds
// cursors from the recorded journals, the bridger records bridges in the
// hub's Cursors and waits for vtgate's serving graph.
type env struct {
	fake  *fakevtgate.Server
	src   *source.Client
	st    store.Store
	reg   *reshard.Registry
	codec *cursor.Codec
	hub   *hub.Hub
	br    *Bridger
	def   *streams.Definition

	hubOpts []hub.Option // the hub's, for hubWith

	mu       sync.Mutex
	outcomes []reshard.Outcome
}

// setup is what an env is built with: its store (nil: an embedded one),
// the source's, the hub's and the bridger's options.
type setup struct {
	st     store.Store
	src    []source.Option
	hub    []hub.Option
	bridge []Option
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv is an env on an embedded store with the bridger's options opts.
func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	return build(t, setup{bridge: opts})
}

// newEnvOn is an env on st.
func newEnvOn(t *testing.T, st store.Store) *env {
	t.Helper()
	return build(t, setup{st: st})
}

// boltStore is an embedded store closed when the test ends.
func boltStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// eachStore runs f on the Redis store and on the embedded one: what
// bridges write to the store must hold on both.
func eachStore(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("redis", func(t *testing.T) { f(t, redistest.NewStore(t, redistest.Prefix())) })
	t.Run("bolt", func(t *testing.T) { f(t, boltStore(t)) })
}

func build(t *testing.T, s setup) *env {
	t.Helper()
	if s.st == nil {
		s.st = boltStore(t)
	}
	e := &env{fake: fakevtgate.New(t), st: s.st}
	e.fake.SetCreateTable("t", "CREATE TABLE `t` (`id` bigint(20) NOT NULL, `doc` longtext, PRIMARY KEY (`id`))")
	e.fake.SetTopology(ks, []string{"0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if e.src, err = source.Dial(ctx, e.fake.Addr, append([]source.Option{source.WithLogger(quiet())}, s.src...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.src.Close)
	if e.codec, err = cursor.NewCodec([]byte("test-signing-key-0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	e.reg = reshard.NewRegistry(e.st)
	// These tests script every VStream call in order: each reader reads on
	// a VStream of its own (tails have tests of their own).
	e.hubOpts = append([]hub.Option{hub.WithLogger(quiet()), hub.WithTails(hub.TailOptions{}),
		hub.WithRebuilder(hub.ClusterRebuilder{Src: e.src, Reg: e.reg}, func(_ string, o reshard.Outcome) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.outcomes = append(e.outcomes, o)
		})}, s.hub...)
	e.hub = e.hubWith(t)
	e.br = e.bridger(t, e.hub, s.bridge...)
	e.def = &streams.Definition{Name: "orders", Keyspace: ks, Tables: []string{"t"}, CreatedAt: time.Unix(1_700_000_000, 0)}
	if err := e.def.Normalize(); err != nil {
		t.Fatal(err)
	}
	return e
}

// hubWith is another hub (another replica) on the env's store and source,
// with the env's hub options and opts, closed when the test ends.
func (e *env) hubWith(t *testing.T, opts ...hub.Option) *hub.Hub {
	t.Helper()
	h, err := hub.New(e.src, e.codec, e.st, append(e.hubOpts[:len(e.hubOpts):len(e.hubOpts)], opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// bridger is a bridger over h's cursors with opts, closed when the test
// ends (before h).
func (e *env) bridger(t *testing.T, h *hub.Hub, opts ...Option) *Bridger {
	t.Helper()
	b, err := New(h.Cursors(), e.st, e.src, append([]Option{WithLogger(quiet()), WithTopology(e.src)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func (e *env) token(t *testing.T, v *binlogdatapb.VGtid) string {
	t.Helper()
	tok, err := e.hub.Token(context.Background(), e.def, v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// open opens a subscription closed when the test ends.
func (e *env) open(t *testing.T, from hub.From) *hub.Subscription {
	t.Helper()
	s, err := e.hub.Open(context.Background(), e.def, from)
	if err != nil {
		t.Fatalf("Open(%+v): %v", from, err)
	}
	t.Cleanup(s.Close)
	return s
}

func (e *env) ack(t *testing.T, sub string, v *binlogdatapb.VGtid) *binlogdatapb.VGtid {
	t.Helper()
	got, err := e.hub.Cursors().Ack(context.Background(), e.def.Name, sub, v)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// lastOutcome is the latest rebuild outcome the hub reported.
func (e *env) lastOutcome() reshard.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.outcomes) == 0 {
		return ""
	}
	return e.outcomes[len(e.outcomes)-1]
}

// recordJournal records journal 7 (shard 0 → -80,80-, cut at gtid(20)) as
// the journal hook does, and returns it.
func (e *env) recordJournal(t *testing.T) *reshard.Journal {
	t.Helper()
	j, ok := reshard.FromEvent(ks, "0", &binlogdatapb.Journal{Id: 7, MigrationType: binlogdatapb.MigrationType_SHARDS,
		LocalPosition: gtid(20), ShardGtids: targets.ShardGtids,
		Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "0"}}})
	if !ok {
		t.Fatal("not a reshard journal")
	}
	return e.record(t, j)
}

// record records each participant's view of one journal, as the journal
// hook and the Mover do, and returns the journal, complete.
func (e *env) record(t *testing.T, views ...*reshard.Journal) *reshard.Journal {
	t.Helper()
	ctx := context.Background()
	for _, j := range views {
		if _, err := e.reg.Record(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.reg.List(ctx, ks)
	if err != nil || len(all) != 1 || !all[0].Complete() {
		t.Fatalf("recorded journals %v, %v", all, err)
	}
	return all[0]
}

// bridge captures alice's old-shard events (she acked pos(10)) into a
// spool and checks what was recorded.
func bridge(t *testing.T, e *env, j *reshard.Journal) *hub.SubscriberState {
	t.Helper()
	ctx := context.Background()
	st, err := e.br.Subscriber(ctx, e.def, "alice", j)
	if err != nil || st.State != "done" {
		t.Fatalf("Subscriber: %+v, %v", st, err)
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
	if need, why := e.br.NeedsOldShards(sub, j); need {
		t.Errorf("still needs the old shards after bridging: %s", why)
	}
	return sub
}

// spool returns the transactions of a spool.
func spool(t *testing.T, e *env, log string) []*source.Txn {
	t.Helper()
	entries, err := e.st.ReadLog(context.Background(), log, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []*source.Txn
	for _, en := range entries {
		txn, err := hub.DecodeSpoolEntry(en.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, txn)
	}
	return out
}

// spooled returns the positions of the spool's entries.
func spooled(t *testing.T, e *env, log string) []*binlogdatapb.VGtid {
	t.Helper()
	var out []*binlogdatapb.VGtid
	for _, txn := range spool(t, e, log) {
		out = append(out, txn.VGtid)
	}
	return out
}

func next(t *testing.T, s *hub.Subscription) *hub.Delivery {
	t.Helper()
	// Only a failure waits this long: a loaded machine (a shared CI host)
	// must not turn a slow delivery into a failed test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return d
}

// The checks every transaction test shares.
var (
	summary = txntest.Summary
	member  = txntest.Member
	samePos = txntest.SamePos
)
