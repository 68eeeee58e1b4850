package hub

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// Registrations made, withdrawn and woken concurrently: every one is
// either withdrawn (Stop true) and never run, or run exactly once; and a
// registration made at the head is never left waiting past an append (no
// wake-up lost between the check and the registration).
func TestRingParkConcurrent(t *testing.T) {
	r := newRing(1<<30, 1<<20, pos(1))
	const readers, rounds = 8, 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	var appended atomic.Uint64
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				_, next := r.head()
				var runs atomic.Int32
				woke := make(chan struct{})
				p, ok := r.park(next, func() {
					if runs.Add(1) == 1 {
						close(woke)
					}
				})
				if !ok {
					continue // appended meanwhile: a read would not block
				}
				if next%2 == 0 && p.Stop() {
					if runs.Load() != 0 {
						t.Error("a withdrawn registration ran")
					}
					continue
				}
				select {
				case <-woke:
				case <-done:
					// The appender stopped: this one waits for an entry
					// never appended, unless it was appended first.
					if appended.Load() > next && runs.Load() == 0 {
						t.Errorf("registration for entry %d not woken after it was appended", next)
					}
					p.Stop()
				}
				if n := runs.Load(); n > 1 {
					t.Errorf("a registration ran %d times", n)
				}
			}
		}()
	}
	go func() {
		for i := range uint64(50000) {
			r.append(&source.Txn{}, pos(int(i)+2), nil)
			appended.Store(i + 1)
		}
		close(done)
	}()
	wg.Wait()
	<-done
	if n := len(r.waiters); n != 0 {
		t.Errorf("%d registrations left behind", n)
	}
}

// A round runs every registration exactly once, also when it shares them
// out over the CPUs.
func TestWakeRoundRunsEachOnce(t *testing.T) {
	for _, n := range []int{0, 1, wakePart - 1, wakePart, 2*wakePart + 1, 1000} {
		r := newRing(1<<30, 1<<20, pos(1))
		runs := make([]atomic.Int32, n)
		var wg sync.WaitGroup
		wg.Add(n)
		for i := range n {
			if _, ok := r.park(0, func() { runs[i].Add(1); wg.Done() }); !ok {
				t.Fatal("park at the head refused")
			}
		}
		r.append(&source.Txn{}, pos(2), nil)
		wg.Wait()
		for i := range runs {
			if got := runs[i].Load(); got != 1 {
				t.Fatalf("n=%d: registration %d ran %d times", n, i, got)
			}
		}
	}
}

// One round at a time: entries appended while a round runs are woken for
// by its end, in one round, and only registrations for entries that are
// there are taken — one made since the last append waits for the next.
func TestWakeRoundsOneAtATime(t *testing.T) {
	r := newRing(1<<30, 1<<20, pos(1))
	const n = 4 * wakePart // enough for a round in parts
	hold := make(chan struct{})
	var first sync.WaitGroup
	first.Add(n)
	for range n {
		r.park(0, func() { first.Done(); <-hold })
	}
	r.append(&source.Txn{}, pos(2), nil) // entry 0: the round starts and holds

	var second atomic.Int32
	var secondDone sync.WaitGroup
	secondDone.Add(n)
	for range n {
		if _, ok := r.park(1, func() { second.Add(1); secondDone.Done() }); !ok {
			t.Fatal("park at the head refused")
		}
	}
	r.append(&source.Txn{}, pos(3), nil) // entry 1, during the round
	var third atomic.Int32
	for range n {
		r.park(2, func() { third.Add(1) })
	}
	if got := second.Load(); got != 0 {
		t.Fatalf("%d registrations for entry 1 ran while the first round ran", got)
	}
	close(hold)
	first.Wait()
	secondDone.Wait() // the first round's end runs them
	if got := second.Load(); got != n {
		t.Fatalf("entry 1 woke %d registrations, want %d", got, n)
	}
	for {
		r.wmu.Lock()
		waking, left := r.waking, len(r.waiters)
		r.wmu.Unlock()
		if !waking {
			if left != n {
				t.Fatalf("%d registrations left for entry 2, want %d", left, n)
			}
			break
		}
		runtime.Gosched()
	}
	if got := third.Load(); got != 0 {
		t.Fatalf("%d registrations for entry 2 ran before it was appended", got)
	}
	r.append(&source.Txn{}, pos(4), nil)
	for third.Load() != n {
		runtime.Gosched()
	}
}
