package hub

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
)

// A reader at the tail's head can be parked: the function given to Park
// runs when the tail appends, and the reader then gets what was appended
// with TryNext. A reader with something ready, or on a VStream of its own,
// cannot be parked.
func TestSubscriptionPark(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	live := e.open(t, From{})
	next(t, live)
	wake, ok := parkChan(live)
	if !ok {
		t.Fatal("a reader at the tail's head cannot be parked")
	}
	select {
	case <-wake:
		t.Fatal("woken before the tail appended anything")
	default:
	}
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 12)})
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatal("not woken within 30 s of the tail's transactions")
	}
	var got []string
	for len(got) < 2 {
		// Both are appended by now or soon: wait for each on a fresh
		// registration, as the WebSocket writer does.
		d, ok, err := live.TryNext(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			w, parked := parkChan(live)
			if !parked {
				t.Fatal("nothing ready, yet the reader cannot be parked")
			}
			select {
			case <-w:
			case <-time.After(30 * time.Second):
				t.Fatal("not woken for the second transaction")
			}
			continue
		}
		if len(d.Events) > 0 {
			got = append(got, summary(t, d.Txn)+"@"+shortPos(d.VGtid))
		}
	}
	same(t, "read after wake-ups", got, want(11, 12))
	if _, ok := parkChan(live); !ok {
		t.Fatal("a reader back at the head cannot be parked")
	}

	// Something ready: no parking.
	behind := e.open(t, From{Token: e.token(t, pos(10))})
	same(t, "from the ring", read(t, behind, 1), want(11))
	if _, ok := parkChan(behind); ok {
		t.Fatal("a reader with a transaction ready (12) was parked")
	}

	// A cursor older than the ring reads a VStream of its own: only Next
	// waits on it.
	e.fake.Push(fakevtgate.Script{Open: true, Batches: txns(6, 6)})
	old := e.open(t, From{Token: e.token(t, pos(5))})
	same(t, "catch-up", read(t, old, 1), want(6))
	if _, ok := parkChan(old); ok {
		t.Fatal("a reader on a VStream of its own was parked")
	}
}

// parkChan parks s with a function that closes the channel it returns.
func parkChan(s *Subscription) (<-chan struct{}, bool) {
	c := make(chan struct{})
	_, ok := s.Park(func() { close(c) })
	return c, ok
}

// A withdrawn registration is not run at the next append, and the others
// are, each once; withdrawing one that was taken reports false.
func TestParkStop(t *testing.T) {
	e, call := tailEnv(t, pos(10), TailOptions{RingBytes: 1 << 20, RingEntries: 100})
	a, b := e.open(t, From{}), e.open(t, From{})
	next(t, a)
	next(t, b)
	var ran [3]atomic.Int32
	pa, ok := a.Park(func() { ran[0].Add(1) })
	if !ok {
		t.Fatal("a reader at the head cannot be parked")
	}
	// woke is closed once both kept registrations have run, in either
	// order.
	woke := make(chan struct{})
	var kept atomic.Int32
	keptRan := func() {
		if kept.Add(1) == 2 {
			close(woke)
		}
	}
	pb, _ := b.Park(func() { ran[1].Add(1); keptRan() })
	if _, ok := b.Park(func() { ran[2].Add(1); keptRan() }); !ok {
		t.Fatal("a second registration was refused")
	}
	if !pa.Stop() {
		t.Fatal("withdrawing a waiting registration reported false")
	}
	if pa.Stop() {
		t.Fatal("withdrawing it twice reported true")
	}
	call.Answer(t, fakevtgate.Script{Open: true, Batches: txns(11, 11)})
	select {
	case <-woke:
	case <-time.After(30 * time.Second):
		t.Fatal("not woken within 30 s of the tail's transaction")
	}
	if pb.Stop() {
		t.Fatal("withdrawing a registration already run reported true")
	}
	if got := []int32{ran[0].Load(), ran[1].Load(), ran[2].Load()}; got[0] != 0 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("runs (withdrawn, kept, kept) = %v, want [0 1 1]", got)
	}
}
