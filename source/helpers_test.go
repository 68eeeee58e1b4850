package source_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

const ks = "customer"

var (
	s0   = fakevtgate.Shard{Keyspace: ks, Name: "0"}
	spec = source.Spec{Name: "orders", Keyspace: ks,
		Rules: []*binlogdatapb.Rule{{Match: "t", Filter: "select * from `t`"}}}
	// tField is table t as its FIELD event describes it.
	tField = s0.Field("t", fakevtgate.BigintPK("id"), fakevtgate.LongText("doc"))
)

// Table t with doc as MariaDB's JSON type (LONGTEXT + json_valid CHECK).
const tJSON = "CREATE TABLE `t` (\n  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n" +
	"  `doc` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`doc`)),\n" +
	"  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"

// Table t with doc as plain text.
const tText = "CREATE TABLE `t` (\n  `id` bigint(20) NOT NULL AUTO_INCREMENT,\n" +
	"  `doc` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL,\n" +
	"  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"

// gtid is the MariaDB position after transaction n on shard 0.
func gtid(n int) string { return fmt.Sprintf("MariaDB/0-1-%d", n) }

// pos is the stream position after transaction n on shard 0.
func pos(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid(ks, "0", gtid(n)) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// setup starts a fake vtgate and a client dialled to it, closed when the
// test ends.
func setup(t *testing.T, opts ...source.Option) (*fakevtgate.Server, *source.Client) {
	t.Helper()
	fake := fakevtgate.New(t)
	fake.SetCreateTable("t", tText)
	c := dial(t, fake, opts...)
	t.Cleanup(c.Close)
	return fake, c
}

func dial(t *testing.T, fake *fakevtgate.Server, opts ...source.Option) *source.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := source.Dial(ctx, fake.Addr, append([]source.Option{source.WithLogger(quiet())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// open starts a reader closed when the test ends.
func open(t *testing.T, c *source.Client, from *binlogdatapb.VGtid, opts ...source.ReadOption) *source.Reader {
	t.Helper()
	r := c.Open(context.Background(), spec, from, opts...)
	t.Cleanup(r.Close)
	return r
}

// next reads one transaction, failing the test if none comes.
func next(t *testing.T, r *source.Reader) *source.Txn {
	t.Helper()
	txn, err := nextErr(r)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return txn
}

func nextErr(r *source.Reader) (*source.Txn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.Next(ctx)
}

// members decodes an event's JSON.
func members(t *testing.T, e event.Event) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(e.AppendJSON(nil, ""), &m); err != nil {
		t.Fatalf("event JSON %s: %v", e.AppendJSON(nil, ""), err)
	}
	return m
}

// summary renders a transaction's changes compactly, e.g.
// "insert {"id":1,"doc":"x"}; insert {...}", for comparisons.
func summary(t *testing.T, txn *source.Txn) string {
	t.Helper()
	var parts []string
	for _, e := range txn.Events {
		m := members(t, e)
		if e.Type != event.TypeChange {
			parts = append(parts, string(e.Type))
			continue
		}
		parts = append(parts, string(e.Op)+" "+string(m["after"]))
	}
	return strings.Join(parts, "; ")
}

func samePos(t *testing.T, what string, got, want *binlogdatapb.VGtid) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s: position %v, want %v", what, got, want)
	}
}

// cutMidTransaction is a stream that delivers the transaction at 11 and
// then stops in the middle of the one at 12, and the stream that, reopened
// at 11, delivers 12 whole.
func cutMidTransaction() []fakevtgate.Script {
	return []fakevtgate.Script{{Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), tField, s0.Insert("t", 100, []string{"1", "a"})),
		{s0.Begin(101), s0.Insert("t", 101, []string{"2", "b"})}, // and then nothing
	}}, {Open: true, Batches: [][]*binlogdatapb.VEvent{
		s0.Txn(101, pos(12), tField, s0.Insert("t", 101, []string{"2", "b"})),
	}}}
}
