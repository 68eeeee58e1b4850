package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/cursor"
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
	// targets is where journal 7 (0 → -80,80-) continues the stream.
	targets = fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5")
	// after5 is a position on the new shards after their first transaction.
	after5 = fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-5")
)

// gtid is the MariaDB position after transaction n on shard 0; pos the
// stream position there.
func gtid(n int) string             { return fmt.Sprintf("MariaDB/0-1-%d", n) }
func pos(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid(ks, "0", gtid(n)) }
func field(s fakevtgate.Shard) *binlogdatapb.VEvent {
	return s.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))
}

// row is a one-row insert into t.
func row(s fakevtgate.Shard, id string) *binlogdatapb.VEvent {
	return s.Insert("t", 100, []string{id, "x" + id})
}

// liveOnNewShards is the VStream from journal 7's targets.
func liveOnNewShards() fakevtgate.Script {
	return fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{sLo.Txn(100, after5, field(sLo), row(sLo, "4"))}}
}

// env is a hub over a boltstore and a source dialled to a fake vtgate,
// with cursor rebuilds wired as in production (server/reshard.go).
type env struct {
	fake *fakevtgate.Server
	src  *source.Client
	st   store.Store
	reg  *reshard.Registry
	hub  *Hub
	def  *streams.Definition

	mu       sync.Mutex
	outcomes []reshard.Outcome
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	return newEnvSource(t, nil, opts...)
}

// newEnvSource is newEnv with options for the source client (e.g. a chunk
// size).
func newEnvSource(t *testing.T, srcOpts []source.Option, opts ...Option) *env {
	t.Helper()
	return newEnvOn(t, boltStore(t), srcOpts, opts...)
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

// eachStore runs f on the Redis store and on the embedded one: what the
// hub writes to the store must hold on both.
func eachStore(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("redis", func(t *testing.T) { f(t, redistest.NewStore(t, redistest.Prefix())) })
	t.Run("bolt", func(t *testing.T) { f(t, boltStore(t)) })
}

// newEnvOn is newEnvSource on st.
func newEnvOn(t *testing.T, st store.Store, srcOpts []source.Option, opts ...Option) *env {
	t.Helper()
	e := &env{fake: fakevtgate.New(t), st: st}
	e.fake.SetCreateTable("t", "CREATE TABLE `t` (`id` bigint(20) NOT NULL, `doc` longtext, PRIMARY KEY (`id`))")
	e.fake.SetTopology(ks, []string{"0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if e.src, err = source.Dial(ctx, e.fake.Addr, append([]source.Option{source.WithLogger(quiet())}, srcOpts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.src.Close)
	codec, err := cursor.NewCodec([]byte("test-signing-key-0123456789"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.reg = reshard.NewRegistry(e.st)
	// These tests script every VStream call in order: each reader reads on
	// a VStream of its own (tails have tests of their own).
	opts = append([]Option{WithLogger(quiet()), WithTails(TailOptions{}), WithRebuilder(ClusterRebuilder{Src: e.src, Reg: e.reg}, func(_ string, o reshard.Outcome) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.outcomes = append(e.outcomes, o)
	})}, opts...)
	if e.hub, err = New(e.src, codec, e.st, opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.hub.Close)
	e.def = &streams.Definition{Name: "orders", Keyspace: ks, Tables: []string{"t"}, CreatedAt: time.Unix(1_700_000_000, 0)}
	if err := e.def.Normalize(); err != nil {
		t.Fatal(err)
	}
	return e
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
func (e *env) open(t *testing.T, from From) *Subscription {
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

// putState stores st as its subscriber's state, whatever is stored.
func (e *env) putState(t *testing.T, st *SubscriberState) {
	t.Helper()
	_, err := e.hub.cursors.update(context.Background(), e.def.Name, st.Name, nil, func(*SubscriberState) (*SubscriberState, error) {
		return st, nil
	})
	if err != nil {
		t.Fatal(err)
	}
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

func next(t *testing.T, s *Subscription) *Delivery {
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
