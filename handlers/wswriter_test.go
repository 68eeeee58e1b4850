package handlers

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// Kicks from many goroutines at once (kick, and kickHere as the timers and
// the producer do), each after recording work: at most one writer runs at
// any time, and every piece of work recorded is taken
// by a writer (none is left behind with the writer stopped). The writer
// here takes the work as the session's does — mark running (look), take
// what is there, and stop only by rest.
func TestWriterKicksConcurrent(t *testing.T) {
	var (
		w       writerState
		pending atomic.Int64 // recorded, not yet taken
		taken   atomic.Int64
		running atomic.Int32
		writers sync.WaitGroup
		broken  atomic.Bool
	)
	// body is the writer: on a goroutine of its own (start), or on the
	// kicker's (kickHere).
	body := func() {
		if running.Add(1) != 1 {
			broken.Store(true)
		}
		for {
			w.look()
			worked := false
			for pending.Load() > 0 {
				pending.Add(-1)
				taken.Add(1)
				worked = true
			}
			if !worked {
				// Leave running before rest: a kick after rest starts
				// the next writer, which must not overlap this one.
				running.Add(-1)
				if w.rest() {
					return
				}
				if running.Add(1) != 1 {
					broken.Store(true)
				}
			}
		}
	}
	w.start = func() {
		writers.Add(1)
		go func() {
			defer writers.Done()
			body()
		}()
	}
	// Rounds: the kickers record and kick at once, then every piece of the
	// round must be taken; a kick lost leaves the round waiting for good.
	const kickers, rounds = 8, 1000
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range kickers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pending.Add(1)
				if i%2 == 0 {
					w.kick()
				} else {
					w.kickHere(body) // a timer's goroutine
				}
			}()
		}
		wg.Wait()
		want := int64((r + 1) * kickers)
		wait.For(t, "every piece of work kicked to be taken (a kick was lost)", 30*time.Second, func() bool {
			return taken.Load() == want
		})
	}
	writers.Wait()
	if broken.Load() {
		t.Fatal("two writers ran at once")
	}
	if s := w.state.Load(); s != writerIdle {
		t.Fatalf("writer state %d once all work is taken and the writers ended, want idle", s)
	}
	w.done()
	w.kick()
	if s := w.state.Load(); s != writerDone {
		t.Fatalf("a kick after done changed the state to %d", s)
	}
}
