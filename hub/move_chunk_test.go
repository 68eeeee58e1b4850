package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// oneMove is a Mover with one recorded move and no workflow pending.
type oneMove struct{ mv streams.Move }

func (m oneMove) Pending(string, []string) bool                 { return false }
func (m oneMove) Sync(context.Context, string, time.Time) error { return nil }
func (m oneMove) Fresh(context.Context, time.Time) error        { return nil }
func (m oneMove) Completed(context.Context, string, []string) (bool, error) {
	return false, nil
}
func (m oneMove) Blocked(context.Context, string) (*streams.Block, error) { return nil, nil }
func (m oneMove) Moves(context.Context, string) ([]streams.Move, error) {
	return []streams.Move{m.mv}, nil
}

// A chunked transaction past a MoveTables cutover (a reverse copy on a
// shard already at the cutover while another is not) is dropped whole:
// its pieces, at the position before it, as well as its last piece.
func TestMoveDropsChunkedTransactionPastCut(t *testing.T) {
	g := func(shard string, n int) string {
		return fmt.Sprintf("MariaDB/0-%s-%d", map[string]string{"-80": "2", "80-": "3"}[shard], n)
	}
	at := func(lo, hi int) *binlogdatapb.VGtid {
		return fakevtgate.VGtid(ks, "-80", g("-80", lo), "80-", g("80-", hi))
	}
	mv := streams.Move{Journal: "j1", From: ks, To: "commerce", Tables: []string{"t"},
		Local: map[string]string{"-80": g("-80", 20), "80-": g("80-", 20)}, Targets: map[string]string{"0": "MariaDB/0-9-5"}}
	e := newEnvSource(t, []source.Option{source.WithChunkBytes(1)}, WithMoveWatch(oneMove{mv}))
	lo, hi := fakevtgate.Shard{Keyspace: ks, Name: "-80"}, fakevtgate.Shard{Keyspace: ks, Name: "80-"}
	rowOn := func(s fakevtgate.Shard, id string) []*binlogdatapb.VEvent { return []*binlogdatapb.VEvent{row(s, id)} }
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		// 80- is at the cutover: its transaction 21 is a reverse copy.
		{field(hi), field(lo), hi.Begin(100)}, rowOn(hi, "1"), rowOn(hi, "2"), rowOn(hi, "3"),
		{hi.Pos(at(19, 21)), hi.Commit(100)},
		lo.Txn(101, at(20, 21), row(lo, "4")),
	}})
	src := e.hub.up.Open(context.Background(), e.def, at(19, 20))
	defer src.Close()
	var got []string
	for len(got) < 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		txn, err := src.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if len(txn.Events) > 0 {
			got = append(got, summary(t, txn))
		}
	}
	if want := "4 | moved"; strings.Join(got, " | ") != want {
		t.Fatalf("got %s, want %s (the reverse copy dropped whole)", strings.Join(got, " | "), want)
	}
}

// ResumeInTxn counts events of a transaction on the keyspace a reader is
// on: a movingSource whose position is already past the cutover goes to
// the target keyspace without it, and drops nothing there.
func TestMoveResumeInTxnNotCarriedToTarget(t *testing.T) {
	g := func(shard string, n int) string {
		return fmt.Sprintf("MariaDB/0-%s-%d", map[string]string{"-80": "2", "80-": "3"}[shard], n)
	}
	mv := streams.Move{Journal: "j1", From: ks, To: "commerce", Tables: []string{"t"},
		Local: map[string]string{"-80": g("-80", 20), "80-": g("80-", 20)}, Targets: map[string]string{"0": "MariaDB/0-9-5"}}
	e := newEnvSource(t, []source.Option{source.WithChunkBytes(1)}, WithMoveWatch(oneMove{mv}))
	c0 := fakevtgate.Shard{Keyspace: "commerce", Name: "0"}
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		{field(c0), c0.Begin(100)}, {row(c0, "1")}, {row(c0, "2")}, {row(c0, "3")},
		{c0.Pos(fakevtgate.VGtid("commerce", "0", "MariaDB/0-9-6")), c0.Commit(100)},
	}})
	src := e.hub.up.Open(context.Background(), e.def, fakevtgate.VGtid(ks, "-80", g("-80", 20), "80-", g("80-", 20)), source.ResumeInTxn(2))
	defer src.Close()
	var got []string
	for len(got) < 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		txn, err := src.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if len(txn.Events) > 0 {
			got = append(got, summary(t, txn))
		}
	}
	if want := "moved | 1 | 2 | 3"; strings.Join(got, " | ") != want {
		t.Fatalf("got %s, want %s", strings.Join(got, " | "), want)
	}
}
