package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// The soak's readers (soak_test.go). Each reads one stream through one
// transport, in a goroutine of its own, and keeps every event it was
// delivered; when its connection breaks (its gateway killed) it connects
// again, to its own gateway or else the other, from where it resumes: a
// named subscriber from its stored cursor (the events after its last
// confirmed ack are dropped: they come again), an anonymous one from the
// cursor of the last whole transaction it read (the events of one it read
// only part of are dropped: it comes again whole). Every event of a
// transaction carries the cursor after the whole of it, so a reader
// resumes and acks only at an event that ends one (ev.TxnEnd), as a
// client must. What it kept must then be every row written since it
// began, each once.

// soakStep names what the soak is doing, for the readers' reports.
var soakStep atomic.Value

func currentStep() string {
	s, _ := soakStep.Load().(string)
	return s
}

type soakReader struct {
	name      string
	transport string // pull, sse, ws
	stream    string
	sub       string // "" for an anonymous token holder
	home      int    // index of its gateway in gws
	gws       []*gateway
	ackEvery  int // a named reader acks (POST) every so many events while online

	mu         sync.Mutex
	cond       *sync.Cond
	evs        []ev   // delivered, heartbeats left out
	acked      int    // len(evs) at the last stored ack
	cursor     string // an anonymous reader's resume cursor when offline
	base       int    // index in the writer's rows of the first row it must get
	reconnects int
	resyncs    []string // steps at which it got resync
	moved      int      // reshard and moved events
	lastErr    error
	stop       context.CancelFunc
	done       chan struct{}
}

func newSoakReader(name, transport, stream, sub string, home int, gws []*gateway, cursor string, base int) *soakReader {
	r := &soakReader{name: name, transport: transport, stream: stream, sub: sub, home: home, gws: gws, cursor: cursor, base: base, ackEvery: 50}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *soakReader) online() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done != nil
}

// start connects the reader and keeps it reading until goOffline.
func (r *soakReader) start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.stop, r.done = cancel, make(chan struct{})
	done := r.done
	r.mu.Unlock()
	go func() {
		defer close(done)
		alt := 0 // where to try first: its own gateway, or after a failure the next
		for first := true; ctx.Err() == nil; first = false {
			if !first {
				r.mu.Lock()
				r.truncate()
				r.mu.Unlock()
			}
			c, err := r.connect(ctx, alt)
			if err != nil {
				r.setErr(err)
				alt++
				wait.Sleep(ctx, 200*time.Millisecond) // pacing: its gateways are down or refuse it
				continue
			}
			n := r.read(ctx, c)
			c.close()
			switch {
			case ctx.Err() != nil:
			case n == 0: // refused at once (a pull client connects lazily)
				alt++
				wait.Sleep(ctx, 200*time.Millisecond)
			default:
				r.mu.Lock()
				r.reconnects++
				r.mu.Unlock()
				alt = 0
			}
		}
	}()
}

// connect tries the gateways in turn from its own (+alt).
func (r *soakReader) connect(ctx context.Context, alt int) (client, error) {
	r.mu.Lock()
	cursor := r.cursor
	if r.sub != "" {
		cursor = "" // the stored one
	}
	r.mu.Unlock()
	var errs []string
	for i := range r.gws {
		g := r.gws[(r.home+alt+i)%len(r.gws)]
		c, err := transports[r.transport](ctx, g, r.stream, r.sub, cursor)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("connect: %s", strings.Join(errs, "; "))
}

// read keeps what c delivers until it fails; it returns how many events
// it read.
func (r *soakReader) read(ctx context.Context, c client) (n int) {
	for ; ; n++ {
		e, err := c.next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.setErr(fmt.Errorf("%s: %w", currentStep(), err))
			}
			return n
		}
		if e.Type == "heartbeat" {
			continue
		}
		r.mu.Lock()
		r.evs = append(r.evs, e)
		switch e.Type {
		case "resync":
			r.resyncs = append(r.resyncs, currentStep())
		case "reshard", "moved":
			r.moved++
		}
		ack := r.sub != "" && r.ackEvery > 0 && e.Cursor != "" && e.TxnEnd && len(r.evs)-r.acked >= r.ackEvery
		kept := len(r.evs)
		r.cond.Broadcast()
		r.mu.Unlock()
		if ack {
			// Through the API, which answers once the ack is stored: the
			// reader knows where it resumes if its gateway dies next.
			if err := r.ackHTTP(ctx, e.Cursor); err == nil {
				r.mu.Lock()
				r.acked = max(r.acked, kept)
				r.mu.Unlock()
			}
		}
	}
}

func (r *soakReader) ackHTTP(ctx context.Context, cursor string) error {
	var err error
	for i := range r.gws {
		p := &pullClient{g: r.gws[(r.home+i)%len(r.gws)], stream: r.stream, subscriber: r.sub}
		if err = p.ack(ctx, cursor); err == nil {
			return nil
		}
	}
	return err
}

func (r *soakReader) setErr(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}

// truncate drops what the reader will get again when it resumes (r.mu
// held): a named one's events after its last stored ack, an anonymous
// one's after the last whole transaction it read, whose cursor it resumes
// from.
func (r *soakReader) truncate() {
	if r.sub != "" {
		r.evs = r.evs[:r.acked]
		return
	}
	n := r.whole()
	r.evs = r.evs[:n]
	if n > 0 {
		r.cursor = r.evs[n-1].Cursor
	}
}

// whole returns how many of the kept events end with a whole transaction:
// the last event kept that ends one, and every event before it (r.mu
// held).
func (r *soakReader) whole() int {
	n := len(r.evs)
	for n > 0 && (r.evs[n-1].Cursor == "" || !r.evs[n-1].TxnEnd) {
		n--
	}
	return n
}

// ackStored acks the cursor of the reader's last whole transaction (a
// named one) and waits until it is stored.
func (r *soakReader) ackStored(ctx context.Context) error {
	r.mu.Lock()
	n := r.whole()
	cursor := ""
	if n > 0 {
		cursor = r.evs[n-1].Cursor
	}
	r.mu.Unlock()
	if r.sub == "" || cursor == "" {
		return nil
	}
	if err := r.ackHTTP(ctx, cursor); err != nil {
		return err
	}
	if err := waitAcked(ctx, r.gws[r.home], r.stream, r.sub, cursor); err != nil {
		return err
	}
	r.mu.Lock()
	r.acked = max(r.acked, n)
	r.mu.Unlock()
	return nil
}

// goOffline disconnects the reader where it is: a named one acks what it
// has, an anonymous one keeps its last cursor.
func (r *soakReader) goOffline(ctx context.Context) error {
	r.halt()
	if err := r.ackStored(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	r.truncate()
	r.mu.Unlock()
	return nil
}

// halt stops the reader.
func (r *soakReader) halt() {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.done = nil
	r.mu.Unlock()
	if done != nil {
		stop()
		<-done
	}
}

// view reads the reader's kept events from the next one on, as a client
// (for readTo).
func (r *soakReader) view() client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &soakView{r: r, i: len(r.evs)}
}

type soakView struct {
	r *soakReader
	i int
}

func (v *soakView) next(ctx context.Context) (ev, error) {
	r := v.r
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		v.i = min(v.i, len(r.evs)) // dropped by a reconnect: they come again
		if v.i < len(r.evs) {
			e := r.evs[v.i]
			v.i++
			return e, nil
		}
		if ctx.Err() != nil {
			err := ctx.Err()
			if r.lastErr != nil {
				err = fmt.Errorf("%w (last error: %v)", err, r.lastErr)
			}
			return ev{}, err
		}
		r.cond.Wait()
	}
}

func (v *soakView) ack(context.Context, string) error { return nil }
func (v *soakView) close()                            {}

// changes returns the change events kept.
func (r *soakReader) changes() []ev {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ev
	for _, e := range r.evs {
		if e.Type == "change" {
			out = append(out, e)
		}
	}
	return out
}

// tally counts the rows of want missing from got and those got more than
// once (end markers and rows outside want aside: checkExactlyOnce names
// every kind).
func tally(got []ev, want []string) (missing, repeated int) {
	seen := map[string]int{}
	for _, e := range got {
		seen[e.str("email")]++
	}
	for _, e := range want {
		switch n := seen[e]; {
		case n == 0:
			missing++
		case n > 1:
			repeated += n - 1
		}
	}
	return missing, repeated
}
