package source_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// rowsOf are one-row insert events into t with ids from..to, each its own
// ROW event as vtgate sends a chunked transaction's rows.
func rowsOf(from, to int) [][]*binlogdatapb.VEvent {
	var out [][]*binlogdatapb.VEvent
	for i := from; i <= to; i++ {
		out = append(out, []*binlogdatapb.VEvent{s0.Insert("t", 100, []string{fmt.Sprint(i), "r"})})
	}
	return out
}

// chunkedTxn is transaction 11 (rows 1..n) as vtgate streams one past
// TransactionChunkSize: BEGIN, its rows as they are read, VGTID, COMMIT.
func chunkedTxn(n int) [][]*binlogdatapb.VEvent {
	out := [][]*binlogdatapb.VEvent{{tField, s0.Begin(100)}}
	out = append(out, rowsOf(1, n)...)
	return append(out, []*binlogdatapb.VEvent{s0.Pos(pos(11)), s0.Commit(100)})
}

// piece renders a delivered piece: ids, and its marks, e.g. "1 2 P@10".
func piece(t *testing.T, txn *source.Txn) string {
	t.Helper()
	var ids []string
	for _, e := range txn.Events {
		ids = append(ids, string(members(t, e)["after"])[len(`{"id":`):][:1])
	}
	marks := ""
	if txn.Partial {
		marks += "P"
	}
	if txn.Continued {
		marks += "C"
	}
	sg := txn.VGtid.ShardGtids[0].Gtid
	return strings.Join(ids, " ") + " " + marks + "@" + sg[strings.LastIndexByte(sg, '-')+1:]
}

// readPieces reads deliveries up to and including the one at pos(11).
func readPieces(t *testing.T, r *source.Reader) []string {
	t.Helper()
	var got []string
	for len(got) < 20 {
		txn := next(t, r)
		if len(txn.Events) == 0 {
			continue
		}
		got = append(got, piece(t, txn))
		if !txn.Partial {
			return got
		}
	}
	t.Fatalf("no end of the transaction in %v", got)
	return nil
}

// A transaction past the chunk size is handed on in pieces as its rows
// arrive: every piece but the last Partial at the position before the
// transaction, every piece but the first Continued, and the newest event
// held back so that the last piece, with the position after it, has one.
func TestChunkedTransactionInPieces(t *testing.T) {
	// One byte: every event passes it, so each new row hands on the one
	// before it.
	fake, c := setup(t, source.WithChunkBytes(1))
	fake.Push(fakevtgate.Script{Open: true, Batches: append(chunkedTxn(5),
		s0.Txn(101, pos(12), s0.Insert("t", 101, []string{"6", "r"})))})
	r := open(t, c, pos(10))

	got := readPieces(t, r)
	want := []string{"1 P@10", "2 PC@10", "3 PC@10", "4 PC@10", "5 C@11"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("pieces %v, want %v", got, want)
	}
	if got := piece(t, next(t, r)); got != "6 @12" {
		t.Fatalf("the next, small transaction: %s, want 6 whole at 12", got)
	}
	if f := fake.Call(t, 0).Req.Flags; f.TransactionChunkSize != 1 {
		t.Errorf("TransactionChunkSize %d, want the chunk size asked vtgate for", f.TransactionChunkSize)
	}
}

// Below the chunk size a transaction is whole, however vtgate cut it
// into responses; larger ones are cut where they pass it.
func TestChunkSizeInBytes(t *testing.T) {
	big := strings.Repeat("x", 200)
	fake, c := setup(t, source.WithChunkBytes(1000))
	rows := func(from, to int) [][]*binlogdatapb.VEvent {
		var out [][]*binlogdatapb.VEvent
		for i := from; i <= to; i++ {
			out = append(out, []*binlogdatapb.VEvent{s0.Insert("t", 100, []string{fmt.Sprint(i), big})})
		}
		return out
	}
	batches := [][]*binlogdatapb.VEvent{{tField, s0.Begin(100)}}
	batches = append(batches, rows(1, 2)...)
	batches = append(batches, []*binlogdatapb.VEvent{s0.Pos(pos(11)), s0.Commit(100), s0.Begin(101)})
	batches = append(batches, rows(3, 7)...)
	batches = append(batches, []*binlogdatapb.VEvent{s0.Pos(pos(12)), s0.Commit(101)})
	fake.Push(fakevtgate.Script{Open: true, Batches: batches})
	r := open(t, c, pos(10))
	if got := piece(t, next(t, r)); got != "1 2 @11" {
		t.Fatalf("two rows under the chunk size: %s, want them whole", got)
	}
	// Each event is about 370 bytes: the third passes 1,000 and
	// the two before it go.
	var got []string
	for {
		txn := next(t, r)
		got = append(got, piece(t, txn))
		if !txn.Partial {
			break
		}
	}
	if want := "3 4 P@11, 5 6 PC@11, 7 C@12"; strings.Join(got, ", ") != want {
		t.Fatalf("pieces %v, want %s", got, want)
	}
}

// A VStream that fails inside a chunked transaction resumes before it
// (cursors are at transaction ends); vtgate sends the transaction again
// from its first event and the reader drops exactly the events it had
// delivered: every row once, in order, the resumed pieces Continued.
func TestResumeInsideChunkedTransaction(t *testing.T) {
	fake, c := setup(t, source.WithChunkBytes(1), source.WithMaxRetryWait(200*time.Millisecond))
	cut := chunkedTxn(7)[:1+5] // BEGIN and rows 1..5: 1..4 go out, 5 is held back
	fake.Push(fakevtgate.Script{Batches: cut,
		Err: vterrors.Errorf(vtrpcpb.Code_UNAVAILABLE, "vstream ended: error streaming from tablet: connection refused"),
	}, fakevtgate.Script{Open: true, Batches: append(chunkedTxn(7),
		s0.Txn(101, pos(12), s0.Insert("t", 101, []string{"8", "r"})))})
	r := open(t, c, pos(10))

	got := readPieces(t, r)
	want := []string{"1 P@10", "2 PC@10", "3 PC@10", "4 PC@10", "5 PC@10", "6 PC@10", "7 C@11"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("pieces %v, want %v", got, want)
	}
	samePos(t, "resumed request", fake.Call(t, 1).Req.Vgtid, pos(10))
	if got := piece(t, next(t, r)); got != "8 @12" {
		t.Fatalf("after the resumed transaction: %s", got)
	}
}

// ResumeInTxn opens a VStream inside a chunked transaction delivered in
// part elsewhere (a follower leaving the tail): the first n events are
// dropped and the first piece is Continued.
func TestResumeInTxnOption(t *testing.T) {
	fake, c := setup(t, source.WithChunkBytes(1))
	fake.Push(fakevtgate.Script{Open: true, Batches: append([][]*binlogdatapb.VEvent{{s0.Pos(pos(10))}}, chunkedTxn(5)...)})
	r := open(t, c, pos(10), source.ResumeInTxn(3))
	got := readPieces(t, r)
	if want := "4 PC@10, 5 C@11"; strings.Join(got, ", ") != want {
		t.Fatalf("pieces %v, want %s", got, want)
	}
}
