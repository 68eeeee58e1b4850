package hub

import (
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

// wakeAll runs every registration exactly once, also when it shares them
// out over the CPUs.
func TestWakeAllRunsEachOnce(t *testing.T) {
	for _, n := range []int{0, 1, wakePart - 1, wakePart, 2*wakePart + 1, 1000} {
		runs := make([]atomic.Int32, n)
		var wg sync.WaitGroup
		wg.Add(n)
		ws := make([]*Parked, n)
		for i := range ws {
			ws[i] = &Parked{f: func() { runs[i].Add(1); wg.Done() }}
		}
		wakeAll(ws)
		wg.Wait()
		for i := range runs {
			if got := runs[i].Load(); got != 1 {
				t.Fatalf("n=%d: registration %d ran %d times", n, i, got)
			}
		}
	}
}
