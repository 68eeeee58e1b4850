package hub

import (
	"context"
	"errors"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
)

// A journal watcher rides a running tail from its position: it gets the
// tail's transactions (journals included) with its own positions, opens
// no VStream, and is not one of the tail's users, so the tail stops for
// want of readers all the same, and the ride ends then.
func TestRideTail(t *testing.T) {
	e := newEnv(t, WithTails(TailOptions{RingBytes: 1 << 20, RingEntries: 100, Idle: 300 * time.Millisecond, StartWait: 5 * time.Second}))
	e.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(pos(10))}}})
	reader := e.open(t, From{}) // starts the tail
	next(t, reader)
	call := e.fake.Call(t, 0)
	if _, ok := e.hub.RideTail("other", pos(10)); ok {
		t.Fatal("a tail of keyspace customer lent to a watcher of another keyspace")
	}
	if _, ok := e.hub.RideTail(ks, pos(5)); ok {
		t.Fatal("a ride from a position older than the ring")
	}
	ride, ok := e.hub.RideTail(ks, pos(10))
	if !ok {
		t.Fatal("no ride on a running tail at its head")
	}
	defer ride.Close()
	if ride.Stream != e.def.Name {
		t.Fatalf("riding %q, want %q", ride.Stream, e.def.Name)
	}
	calls := e.fake.Calls()
	call.Answer(t, fakevtgate.Script{Open: true, Batches: append(txns(11, 12),
		s0.JournalTxn(7, []string{"0"}, gtid(13), pos(13), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"))})
	var journal *binlogdatapb.Journal
	for journal == nil {
		txn, err := ride.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		journal = txn.Journal
	}
	if journal.Id != 7 {
		t.Fatalf("journal %d, want 7", journal.Id)
	}
	if n := e.fake.Calls(); n != calls {
		t.Fatalf("%d VStream calls for the ride, want none", n-calls)
	}

	// Its only reader gone, the tail stops after its idle time although
	// the watcher rides it: the ride ends.
	reader.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		_, err := ride.Next(ctx)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrRideEnded) {
			t.Fatalf("the ride ended with %v, want ErrRideEnded", err)
		}
		break
	}
}
