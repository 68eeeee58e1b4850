package feed

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
	"github.com/vstream-gateway/vstream-gateway/internal/txntest"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Every subscription and VStream a test opens must be gone when it ends.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const ks = "customer"

var s0 = fakevtgate.Shard{Keyspace: ks, Name: "0"}

// pos is the stream position after transaction n on shard 0.
func pos(n int) *binlogdatapb.VGtid {
	return fakevtgate.VGtid(ks, "0", fmt.Sprintf("MariaDB/0-1-%d", n))
}

func field(s fakevtgate.Shard) *binlogdatapb.VEvent {
	return s.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))
}

// row is a one-row insert into t.
func row(s fakevtgate.Shard, id string) *binlogdatapb.VEvent {
	return s.Insert("t", 100, []string{id, "x" + id})
}

// env is a hub over an embedded store and a source dialled to a fake
// vtgate, each reader on a VStream of its own (no tail), as the hub's own
// tests run it.
type env struct {
	fake  *fakevtgate.Server
	codec *cursor.Codec
	hub   *hub.Hub
	def   *streams.Definition
}

func newEnv(t *testing.T, srcOpts ...source.Option) *env {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &env{fake: fakevtgate.New(t)}
	e.fake.SetCreateTable("t", "CREATE TABLE `t` (`id` bigint(20) NOT NULL, `doc` longtext, PRIMARY KEY (`id`))")
	e.fake.SetTopology(ks, []string{"0"}, nil)
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src, err := source.Dial(ctx, e.fake.Addr, append([]source.Option{source.WithLogger(quiet)}, srcOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	if e.codec, err = cursor.NewCodec([]byte("test-signing-key-0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	if e.hub, err = hub.New(src, e.codec, st, hub.WithLogger(quiet), hub.WithTails(hub.TailOptions{})); err != nil {
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

// scope is the cursor scope the hub signs a stream's tokens with.
func scope(def *streams.Definition) string { return def.Name + "\x00" + def.Origin() }

// The checks every transaction test shares.
var (
	summary = txntest.Summary
	samePos = txntest.SamePos
)
