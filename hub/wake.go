package hub

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A parked reader (Subscription.Park) waits with no goroutine of its own:
// it leaves a function with the ring, which a wake-up round after the
// tail's next append (or the ring's close) runs once. An idle WebSocket is
// then a registration here and nothing running (DESIGN §6.1).

// Parked is a parked reader's registration with its stream's ring.
type Parked struct {
	r   *ring
	f   func()
	seq uint64 // the entry it waits for
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

// parkedSet is the part of a ring that parked readers register with. Its
// lock (wmu) guards the registrations and the seq of the next entry as
// the registrations see it, so a reader parks without the ring's lock and
// never waits for an append in progress.
//
// One wake-up round runs at a time. An append during a round does not
// start another: the round's end does, with every registration that is
// due by then. A reader the round has written to and parked again is
// woken once for all the entries appended meanwhile — one write instead
// of one each — so a gateway short of CPU spends less of it per entry
// rather than more, and readers are not written by two rounds at once.
// On a machine with CPU to spare a round ends long before the next
// append, and each entry is woken for at once as before.
type parkedSet struct {
	wmu     sync.Mutex
	waiters []*Parked
	// wgen counts the times waiters were taken: a registration of an
	// earlier generation has been taken (Stop is then a no-op), so taking
	// them costs no walk under the lock.
	wgen uint64
	// next is the seq of the next entry; closed is set with the ring's
	// error. Both change under wmu as well as the ring's lock.
	next   uint64
	closed bool
	// waking is set while a round runs; pending when an entry was
	// appended during it.
	waking, pending bool
}

// park registers f to run once when entry seq is appended or the ring
// closes, if seq is the next entry and the ring is open; otherwise (seq
// is there already, evicted, or the tail stopped) it reports false: a read
// does not block. The check and the registration are made under wmu, with
// which append publishes the entry, so no append falls between them.
func (r *ring) park(seq uint64, f func()) (*Parked, bool) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.closed || seq != r.next {
		return nil, false
	}
	p := &Parked{r: r, f: f, seq: seq, gen: r.wgen, idx: len(r.waiters)}
	r.waiters = append(r.waiters, p)
	return p, true
}

// appended publishes entry seq to the registrations (called by append
// once the entry is in the ring) and wakes the due ones, unless a round
// runs: that round's end takes them.
func (r *ring) appended(next uint64) {
	r.wmu.Lock()
	r.next = next
	var ws []*Parked
	if r.waking {
		r.pending = true
	} else {
		ws = r.takeDue()
		r.waking = len(ws) > 0
	}
	r.wmu.Unlock()
	r.wakeRounds(ws)
}

// closeWaiters takes every registration, due or not, for the ring's
// close, and runs them: a round in progress does not hold them back.
func (r *ring) closeWaiters() {
	r.wmu.Lock()
	r.closed = true
	ws := r.waiters
	r.waiters = nil
	r.wgen++
	r.wmu.Unlock()
	runAll(ws)
}

// takeDue takes the registrations for entries appended, leaving those
// made since the last append (they wait for the next). Called with wmu
// held.
func (r *ring) takeDue() []*Parked {
	ws := r.waiters
	var keep []*Parked
	for i := 0; i < len(ws); {
		if p := ws[i]; p.seq >= r.next {
			keep = append(keep, p)
			last := len(ws) - 1
			ws[i] = ws[last]
			ws[last] = nil
			ws = ws[:last]
			continue
		}
		i++
	}
	r.wgen++
	for i, p := range keep {
		p.gen, p.idx = r.wgen, i
	}
	r.waiters = keep
	return ws
}

// endRound ends a round: it takes the registrations for the next one when
// entries were appended meanwhile.
func (r *ring) endRound() []*Parked {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	var ws []*Parked
	if r.pending {
		r.pending = false
		ws = r.takeDue()
	}
	r.waking = len(ws) > 0
	return ws
}

// wakeRounds runs the functions of taken registrations, and the next
// round when entries came meanwhile. The functions must not block (a
// WebSocket's writes what the socket takes at once, and starts its writer
// goroutine for the rest). A few run on the caller's goroutine. Many are
// shared out over the CPUs, one goroutine per CPU — a goroutine each cost
// more than their writes — taking them a chunk at a time, so that a CPU
// the machine gives to something else holds back one chunk, not half the
// round. The tail waits for no round of many: it goes on appending, and
// the round's end wakes for what came. A round ends when its last chunk is
// taken: the readers of chunks still running park again when done, and
// the round after the next takes them.
func (r *ring) wakeRounds(ws []*Parked) {
	for len(ws) > 0 {
		parts := min(runtime.GOMAXPROCS(0), len(ws)/wakePart)
		if parts > 1 {
			rd := &wakeRound{r: r, ws: ws}
			for range parts {
				go rd.work()
			}
			return
		}
		runAll(ws)
		ws = r.endRound()
	}
}

// wakeRound is a round shared out over the CPUs.
type wakeRound struct {
	r     *ring
	ws    []*Parked
	taken atomic.Int64 // registrations taken by the round's goroutines
	ended atomic.Bool
}

// wakeChunk is how many registrations a round's goroutine takes at once.
const wakeChunk = 16

func (rd *wakeRound) work() {
	n := int64(len(rd.ws))
	for {
		i := rd.taken.Add(wakeChunk) - wakeChunk
		if i >= n {
			break
		}
		runAll(rd.ws[i:min(i+wakeChunk, n)])
		// Let what waits for a CPU run between chunks: the VStream's
		// receiver and the tail, which the next round waits for, would
		// otherwise wait for the scheduler's 10 ms preemption.
		runtime.Gosched()
	}
	if rd.ended.CompareAndSwap(false, true) {
		rd.r.wakeRounds(rd.r.endRound())
	}
}

// wakePart is the fewest registrations worth a goroutine of their own.
const wakePart = 64

func runAll(ws []*Parked) {
	for _, p := range ws {
		p.f()
	}
}
