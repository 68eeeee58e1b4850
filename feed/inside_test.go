package feed

import (
	"context"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// idsBatch collects the ids a page holds.
type idsBatch struct {
	t   *testing.T
	ids []string
}

func (b *idsBatch) Add(d *hub.Delivery) {
	if s := summary(b.t, d.Txn); s != "" {
		b.ids = append(b.ids, s)
	}
}

// hugeTxn is transaction 11 (ids 1..9, three rows per ROW event) as vtgate
// streams a chunked one, then transaction 12 (id 10). With a chunk size of
// one byte its pieces are 1 2 | 3 4 5 | 6 7 8 | 9.
func hugeTxn() [][]*binlogdatapb.VEvent {
	ins := func(a, b, c string) []*binlogdatapb.VEvent {
		return []*binlogdatapb.VEvent{s0.Insert("t", 100, []string{a, "x"}, []string{b, "x"}, []string{c, "x"})}
	}
	return [][]*binlogdatapb.VEvent{
		{field(s0), s0.Begin(100)}, ins("1", "2", "3"), ins("4", "5", "6"), ins("7", "8", "9"),
		{s0.Pos(pos(11)), s0.Commit(100)},
		s0.Txn(101, pos(12), row(s0, "10")),
	}
}

// A pull page ends inside a huge transaction at its limit, its cursor
// (version 2) naming the position before the transaction and the events
// delivered: pages of two events get every row once, whether the next page
// finds the parked subscription or opens a VStream of its own (which reads
// the transaction again and drops what the reader has).
func TestPagesInsideChunkedTransaction(t *testing.T) {
	e := newEnv(t, source.WithChunkBytes(1))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: hugeTxn()})
	ctx := context.Background()
	cursor := e.token(t, pos(10))
	var pages []string
	for page := 1; page <= 20 && !strings.HasSuffix(strings.Join(pages, " "), "10"); page++ {
		s, err := e.hub.Open(ctx, e.def, hub.From{Token: cursor})
		if err != nil {
			t.Fatalf("page %d: Open(%s): %v", page, cursor, err)
		}
		c := NewCollector(s, FirstWait(10*time.Second), NoHoldBack(), EndInside())
		b := &idsBatch{t: t}
		res, err := c.Collect(ctx, b, Limits{Events: 2})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if res.Events > 2 {
			t.Fatalf("page %d holds %d events, limit 2", page, res.Events)
		}
		pages = append(pages, strings.Join(b.ids, " "))
		if cursor, err = s.ResumeCursor(ctx); err != nil {
			t.Fatal(err)
		}
		v, skip, err := e.codec.DecodeIn(ctx, scope(e.def), cursor)
		if err != nil {
			t.Fatal(err)
		}
		if s.InTxn() {
			samePos(t, "a cursor inside the transaction", v, pos(10))
			if cursor[0] != '2' || skip == 0 {
				t.Fatalf("page %d: cursor %q (skip %d) inside the transaction", page, cursor, skip)
			}
		}
		if page == 3 {
			// Not parked: the next page opens a VStream at pos(10).
			s.Close()
			e.fake.Push(fakevtgate.Script{Open: true, Batches: hugeTxn()})
		} else {
			e.hub.Park(s)
		}
	}
	// A page takes what is ready: how the rows fall into pages depends on
	// timing, that each comes once does not.
	if got, want := strings.Join(pages, " "), "1 2 3 4 5 6 7 8 9 10"; strings.Join(strings.Fields(got), " ") != want {
		t.Fatalf("pages %q, want the rows %s once each", strings.Join(pages, " | "), want)
	}
	if n := e.fake.Calls(); n != 2 {
		t.Fatalf("%d VStream calls, want 2 (the parked subscription serves the pages after it)", n)
	}
	samePos(t, "the reopened VStream", e.fake.Call(t, 1).Req.Vgtid, pos(10))
}
