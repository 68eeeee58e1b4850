package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// errIdle ends a connection on which nothing arrived for the idle timeout.
var errIdle = errors.New("nothing arrived from the gateway within the idle timeout")

// watchdog cancels a connection on which nothing arrives for too long: a
// connection that a network failure cut without closing it (no FIN, no
// RST) would otherwise be read forever. The gateway writes something at
// least every 5 s (a heartbeat). While the client waits for room in its
// queue it reads nothing, and the watchdog is paused.
type watchdog struct {
	idle     time.Duration
	deadline atomic.Int64 // unix nanoseconds; 0 while paused
	wg       sync.WaitGroup
}

// watch returns ctx, cancelled with errIdle when the watchdog fires, and
// a stop that ends the watchdog and waits for it.
func newWatchdog(ctx context.Context, idle time.Duration) (*watchdog, context.Context, func()) {
	w := &watchdog{idle: idle}
	w.touch()
	ctx, cancel := context.WithCancelCause(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(max(idle/4, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if d := w.deadline.Load(); d != 0 && now.UnixNano() > d {
					cancel(fmt.Errorf("%w (%v)", errIdle, idle))
					return
				}
			}
		}
	}()
	return w, ctx, func() { cancel(nil); w.wg.Wait() }
}

// touch records that something arrived.
func (w *watchdog) touch() { w.deadline.Store(time.Now().Add(w.idle).UnixNano()) }

// pause stops the clock until the next touch.
func (w *watchdog) pause() { w.deadline.Store(0) }

// cause is why ctx ended: errIdle if the watchdog fired, else err.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && errors.Is(c, errIdle) {
		return c
	}
	return err
}
