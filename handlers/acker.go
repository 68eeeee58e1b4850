package handlers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// acker stores the acks of one streaming connection (a WebSocket's ack
// messages, an SSE connection's Last-Event-ID) in the background, so that
// a store outage costs a named subscriber neither its connection nor its
// acks (DESIGN §12). Acks only move a cursor forward, so only the newest
// pending one matters: a newer ack replaces one not stored yet. While the
// store is unavailable the pending ack is retried with a growing delay;
// when the connection ends, it gets one last bounded attempt and is
// otherwise given up, logged and counted (the subscriber then resumes from
// its previous cursor: repeats, never a loss). Nothing tells the client an
// ack was stored on these transports; the HTTP ack endpoint does, and
// answers 503 when it could not.
type acker struct {
	a *API
	// base gives the final attempt, after the connection ended, its
	// context values (never its cancellation).
	base      context.Context
	def       *streams.Definition
	sub       string
	transport string
	// refused is told about an ack the gateway refuses (an *Error, such
	// as invalid_cursor) or cannot store for another reason than an
	// outage; the connection should end.
	refused func(error)

	mu      sync.Mutex
	pending string
	wake    chan struct{}
	done    chan struct{}
}

// ackRetry bounds the delay between attempts while the store is down;
// ackFinal bounds the last attempt when the connection has ended.
const (
	ackRetryMin = 100 * time.Millisecond
	ackRetryMax = 2 * time.Second
	ackFinal    = 5 * time.Second
)

// newAcker starts the background writer; it runs until ctx ends (and a
// final attempt for a pending ack).
func (a *API) newAcker(ctx, base context.Context, def *streams.Definition, sub, transport string, refused func(error)) *acker {
	k := &acker{a: a, base: base, def: def, sub: sub, transport: transport, refused: refused,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go k.run(ctx)
	return k
}

// offer queues token as the newest ack.
func (k *acker) offer(token string) {
	k.mu.Lock()
	k.pending = token
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// wait returns once the writer has stopped.
func (k *acker) wait() { <-k.done }

func (k *acker) take() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.pending
	k.pending = ""
	return t
}

// putBack keeps a failed ack unless a newer one arrived meanwhile.
func (k *acker) putBack(t string) {
	k.mu.Lock()
	if k.pending == "" {
		k.pending = t
	}
	k.mu.Unlock()
}

func (k *acker) run(ctx context.Context) {
	defer close(k.done)
	delay := ackRetryMin
	retried := false
	for {
		t := k.take()
		if t == "" {
			select {
			case <-ctx.Done():
				k.last() // an ack offered as the connection ended
				return
			case <-k.wake:
				continue
			}
		}
		err := k.store(ctx, t)
		switch {
		case err == nil:
			delay, retried = ackRetryMin, false
			continue
		case errors.Is(err, store.ErrUnavailable) || (ctx.Err() != nil && !isRefusal(err)):
			k.putBack(t)
			if !retried {
				metrics.AckRetried(k.transport)
				k.a.Log.Warn("ack not stored yet: the store is unavailable; retrying in the background",
					"stream", k.def.Name, "subscriber", k.sub, "transport", k.transport, "err", err)
				retried = true
			}
		default:
			k.refused(err)
			return
		}
		select {
		case <-ctx.Done():
			k.last()
			return
		case <-time.After(delay):
			delay = min(2*delay, ackRetryMax)
		}
	}
}

// last makes one bounded attempt at the pending ack once the connection
// has ended.
func (k *acker) last() {
	t := k.take()
	if t == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(k.base), ackFinal)
	defer cancel()
	if err := k.store(ctx, t); err != nil {
		metrics.AckFailed(k.transport)
		k.a.Log.Warn("ack given up: the connection ended while the store was unavailable; the subscriber resumes from its previous cursor (repeats, no loss)",
			"stream", k.def.Name, "subscriber", k.sub, "transport", k.transport, "err", err)
	}
}

func (k *acker) store(ctx context.Context, token string) error {
	_, err := k.a.ackCtx(ctx, k.def, k.sub, token)
	return err
}

func isRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
