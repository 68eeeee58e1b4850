package hub

import (
	"fmt"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// ringPiece is a piece of chunked transaction n (after pos(n)) as the tail
// appends it: Partial pieces at the position before it.
func ringPiece(r *ring, n int, partial, continued bool) {
	txn := &source.Txn{VGtid: pos(n), Partial: partial, Continued: continued}
	if partial {
		txn.VGtid = pos(n - 1)
	}
	before, _ := r.head()
	r.append(txn, txn.VGtid, position.Of(before).Moved(position.Of(txn.VGtid)))
}

// A reader joins the ring only where a transaction starts: a position
// before a chunked transaction joins at its first piece (the search would
// find its last: the pieces do not move the position), also while the tail
// is still inside it, and not at all once that piece was evicted.
func TestRingJoinsAtFirstPiece(t *testing.T) {
	r := newRing(1<<20, 100, pos(10))
	ringPiece(r, 11, false, false) // seq 0: transaction 11, whole
	ringPiece(r, 12, true, false)  // seq 1: the first piece of 12
	ringPiece(r, 12, true, true)   // seq 2
	if seq, ok := r.joinAt(pos(11)); !ok || seq != 1 {
		t.Fatalf("tail inside transaction 12: joinAt(11) = %d, %v; want its first piece, 1", seq, ok)
	}
	ringPiece(r, 12, false, true) // seq 3: the last piece, after 12
	ringPiece(r, 13, false, false)
	for _, c := range []struct {
		pos  int
		want uint64
	}{{10, 0}, {11, 1}, {12, 4}, {13, 5}} {
		if seq, ok := r.joinAt(pos(c.pos)); !ok || seq != c.want {
			t.Errorf("joinAt(%d) = %d, %v; want %d", c.pos, seq, ok, c.want)
		}
	}

	// The first piece evicted: no join before 12 (the reader reads it on
	// a VStream of its own), a join after it as before.
	small := newRing(1<<20, 2, pos(10))
	ringPiece(small, 11, true, false)
	ringPiece(small, 11, true, true)
	ringPiece(small, 11, false, true)
	if seq, ok := small.joinAt(pos(10)); ok {
		t.Fatalf("joined at %d, inside a transaction whose first piece was evicted", seq)
	}
	if seq, ok := small.joinAt(pos(11)); !ok || seq != 3 {
		t.Fatalf("joinAt(11) = %d, %v; want the head, 3", seq, ok)
	}
}

// chunkedRows are the events of transaction 11 with rows from..to as
// vtgate streams a chunked transaction: each row its own response.
func chunkedRows(from, to int) [][]*binlogdatapb.VEvent {
	var out [][]*binlogdatapb.VEvent
	for i := from; i <= to; i++ {
		out = append(out, []*binlogdatapb.VEvent{row(s0, fmt.Sprint(i))})
	}
	return out
}

// pieceOf renders a delivery: its ids, "+" when it carries a cursor.
func pieceOf(t *testing.T, d *Delivery) string {
	t.Helper()
	s := summary(t, d.Txn)
	if d.Cursor != "" {
		s += "+"
	}
	return s
}

// A follower that falls off the ring inside a chunked transaction goes on
// on a VStream of its own from the position before it, skipping the events
// it has: every row once, no cursor before the transaction's last piece.
func TestTailFallOffInsideChunkedTransaction(t *testing.T) {
	e, call := tailEnvSource(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 3},
		[]source.Option{source.WithChunkBytes(1)}, "0")
	slow := e.open(t, From{})
	next(t, slow)
	fast := e.open(t, From{})
	next(t, fast)

	// Rows 1..3 of transaction 11: 1 and 2 go out (3 is held back).
	call.Answer(t, fakevtgate.Script{Open: true, Batches: append([][]*binlogdatapb.VEvent{{field(s0), s0.Begin(100)}}, chunkedRows(1, 3)...)})
	var slowGot, fastGot []string
	for _, s := range []*Subscription{slow, fast} {
		for range 2 {
			d := next(t, s)
			if s == slow {
				slowGot = append(slowGot, pieceOf(t, d))
			} else {
				fastGot = append(fastGot, pieceOf(t, d))
			}
		}
	}
	// The rest, and two more transactions, one at a time as the fast
	// reader takes them: the ring (3 entries) ends with only the last
	// piece and 12, 13.
	rest := append(chunkedRows(4, 6), []*binlogdatapb.VEvent{s0.Pos(pos(11)), s0.Commit(100)})
	rest = append(rest, txns(12, 12)[0][1:], txns(13, 13)[0][1:])
	for _, b := range rest {
		call.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{b}})
		fastGot = append(fastGot, pieceOf(t, next(t, fast)))
	}
	if got, want := strings.Join(fastGot, " "), "1 2 3 4 5 6+ 12+ 13+"; got != want {
		t.Fatalf("fast reader: %s, want %s", got, want)
	}

	// The slow reader's next piece (3) is gone: it reads transaction 11
	// again on its own VStream and drops rows 1 and 2.
	e.fake.Push(fakevtgate.Script{Open: true, Batches: append(append(
		[][]*binlogdatapb.VEvent{{field(s0), s0.Begin(100)}}, chunkedRows(1, 6)...),
		[]*binlogdatapb.VEvent{s0.Pos(pos(11)), s0.Commit(100)}, txns(12, 12)[0][1:], txns(13, 13)[0][1:])})
	for len(slowGot) < 20 && !strings.HasSuffix(strings.Join(slowGot, " "), "13+") {
		d := next(t, slow)
		if len(d.Events) > 0 {
			slowGot = append(slowGot, pieceOf(t, d))
		}
	}
	if got, want := strings.Join(slowGot, " "), "1 2 3 4 5 6+ 12+ 13+"; got != want {
		t.Fatalf("slow reader: %s, want %s (every row once, a cursor at transaction ends only)", got, want)
	}
	samePos(t, "the slow reader's own VStream", e.fake.Call(t, 1).Req.Vgtid, pos(10))
}
