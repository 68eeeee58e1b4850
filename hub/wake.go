package hub

import (
	"runtime"
	"sync"
)

// A parked reader (Subscription.Park) waits with no goroutine of its own:
// it leaves a function with the ring, which the tail's next append (or the
// ring's close) runs once. An idle WebSocket is then a registration here
// and nothing running (DESIGN §6.1).

// Parked is a parked reader's registration with its stream's ring.
type Parked struct {
	r   *ring
	f   func()
	gen uint64 // the ring's waiter generation it was registered in
	idx int    // its place in r.waiters while gen is current
}

// Stop withdraws the registration. It reports false when the wake-up has
// been taken already (its function runs, or has run, or is about to).
// A nil Parked is stopped.
func (p *Parked) Stop() bool {
	if p == nil {
		return false
	}
	r := p.r
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if p.gen != r.wgen || p.idx < 0 {
		return false
	}
	last := r.waiters[len(r.waiters)-1]
	r.waiters[p.idx], last.idx = last, p.idx
	r.waiters[len(r.waiters)-1] = nil
	r.waiters = r.waiters[:len(r.waiters)-1]
	p.idx = -1
	return true
}

// parkedSet is the part of a ring that parked readers register with; its
// lock (wmu) is taken under the ring's read lock to register, and alone to
// withdraw.
type parkedSet struct {
	wmu     sync.Mutex
	waiters []*Parked
	// wgen counts the times the waiters were taken: a registration of an
	// earlier generation has been taken (Stop is then a no-op), so taking
	// them all costs no walk under the lock.
	wgen uint64
}

// park registers f to run once when entry seq is appended or the ring
// closes, if seq is the next entry and the ring is open; otherwise (seq
// is there already, evicted, or the tail stopped) it reports false: a read
// does not block. The check and the registration are made under the
// ring's lock, so no append falls between them.
func (r *ring) park(seq uint64, f func()) (*Parked, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.err != nil || seq != r.first+uint64(len(r.entries)) {
		return nil, false
	}
	r.wmu.Lock()
	p := &Parked{r: r, f: f, gen: r.wgen, idx: len(r.waiters)}
	r.waiters = append(r.waiters, p)
	r.wmu.Unlock()
	return p, true
}

// takeWaiters empties the registrations and returns them, to be woken
// once the ring's lock is released. Called with r.mu held for writing.
func (r *ring) takeWaiters() []*Parked {
	r.wmu.Lock()
	ws := r.waiters
	r.waiters = nil
	r.wgen++
	r.wmu.Unlock()
	return ws
}

// wakeAll runs the functions of taken registrations. They must not block
// (a WebSocket's writes what the socket takes at once, and starts its
// writer goroutine for the rest). Many are shared out over the CPUs, a
// goroutine per part: one goroutine per CPU for a thousand readers, where
// a goroutine each cost more than their writes. The parts are not waited
// for: the tail goes on appending, and a reader still being written when
// the next entry comes takes both in one write (its wake-up finds it
// running and tells it to look again).
func wakeAll(ws []*Parked) {
	parts := min(runtime.GOMAXPROCS(0), len(ws)/wakePart)
	if parts <= 1 {
		runAll(ws)
		return
	}
	size := (len(ws) + parts - 1) / parts
	for i := 0; i < len(ws); i += size {
		go runAll(ws[i:min(i+size, len(ws))])
	}
}

// wakePart is the fewest registrations worth a goroutine of their own.
const wakePart = 64

func runAll(ws []*Parked) {
	for _, p := range ws {
		p.f()
	}
}
