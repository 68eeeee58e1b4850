package handlers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// flights collapses identical pull requests in flight (DESIGN §6.2): the
// first opens the subscription, collects and encodes the page; the
// requests with the same key that come while it runs wait for it and
// write the same bytes. A page made with Cache on is also kept for a short
// while, so that the pollers just behind the others get it too and stay
// in step instead of starting pages of their own.
//
// Not golang.org/x/sync/singleflight: its function runs on the first
// caller's goroutine and context, so a first caller that goes away would
// fail every other caller's request, and it keeps no answer for later
// callers. Here the page is made on a goroutine of its own, under a
// context that ends when the last caller waiting for it has gone.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
	// kept is the bytes of the pages kept after their flight, bounded by
	// maxKept.
	kept int
}

// maxKept bounds the memory of pages kept after their flight; past it a
// finished page is not kept.
const maxKept = 32 << 20

type flight struct {
	done    chan struct{} // closed when pg, err are set
	pg      *page
	err     error
	waiting int // callers waiting; 0 cancels the flight
	cancel  context.CancelFunc
	// deadline is the flight's (its first caller's); zero: none.
	deadline time.Time
}

// do returns the page of key: another caller's, made or being made, or
// one fn makes now. shared reports another caller's page. fn runs with a
// context carrying ctx's values (the token) that ends when every caller
// waiting for it has gone, or at ctx's deadline. A page fn makes is kept for keep (0: not kept)
// when it is worth keeping (page.keep).
func (f *flights) do(ctx context.Context, key string, keep time.Duration, fn func(context.Context) (*page, error)) (pg *page, shared bool, err error) {
	f.mu.Lock()
	fl, ok := f.m[key]
	switch {
	case ok && fl.finished():
		f.mu.Unlock()
		return fl.pg, true, fl.err
	case ok:
		fl.waiting++
	default:
		fctx, cancel := flightContext(ctx)
		fl = &flight{done: make(chan struct{}), waiting: 1, cancel: cancel}
		fl.deadline, _ = fctx.Deadline()
		if f.m == nil {
			f.m = map[string]*flight{}
		}
		f.m[key] = fl
		go f.run(fctx, key, fl, keep, fn)
	}
	f.mu.Unlock()
	select {
	case <-fl.done:
		return fl.pg, ok, fl.err
	case <-ctx.Done():
		if fl.endsBy(ctx) {
			// The flight ends at this deadline too, with what the page's
			// making says of it (a 503 for a VStream that did not start).
			<-fl.done
			return fl.pg, ok, fl.err
		}
		f.leave(key, fl)
		return nil, false, ctx.Err()
	}
}

// endsBy reports whether ctx ended at a deadline the flight has as well
// (or an earlier one).
func (fl *flight) endsBy(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && errors.Is(ctx.Err(), context.DeadlineExceeded) && !fl.deadline.IsZero() && !fl.deadline.After(d)
}

// call runs fn, a panic in it turned into an error: on a goroutine of its
// own a page's panic would end the process, where a request's is
// recovered by net/http.
func call(ctx context.Context, fn func(context.Context) (*page, error)) (pg *page, err error) {
	defer func() {
		if p := recover(); p != nil {
			pg, err = nil, fmt.Errorf("%w: %v\n%s", errPagePanic, p, debug.Stack())
		}
	}()
	return fn(ctx)
}

// errPagePanic wraps a panic met making a page (a 500, logged).
var errPagePanic = errors.New("handlers: panic making a pull page")

// flightContext carries ctx's values (the token) and deadline, not its
// cancellation: the first caller may go while others wait.
func flightContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), d)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}

func (fl *flight) finished() bool {
	select {
	case <-fl.done:
		return true
	default:
		return false
	}
}

// leave withdraws a caller that stopped waiting; the last one cancels the
// flight, which no later caller joins.
func (f *flights) leave(key string, fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl.waiting--
	if fl.waiting > 0 || fl.finished() {
		return
	}
	fl.cancel()
	if f.m[key] == fl {
		delete(f.m, key)
	}
}

// run makes the flight's page and hands it to its callers; a page worth
// keeping stays under its key for keep.
func (f *flights) run(ctx context.Context, key string, fl *flight, keep time.Duration, fn func(context.Context) (*page, error)) {
	pg, err := call(ctx, fn)
	fl.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	fl.pg, fl.err = pg, err
	close(fl.done)
	if f.m[key] != fl {
		return
	}
	n := 0
	if pg != nil {
		n = len(*pg.buf)
	}
	if err != nil || keep <= 0 || !pg.keep || f.kept+n > maxKept {
		delete(f.m, key)
		return
	}
	f.kept += n
	time.AfterFunc(keep, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.kept -= n
		if f.m[key] == fl {
			delete(f.m, key)
		}
	})
}
