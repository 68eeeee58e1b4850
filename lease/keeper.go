package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// keeper renews a held lease and enforces its local deadline.
//
// The deadline is a timer of its own, not a check in the renewal loop: a
// renewal that hangs (a store that stopped answering, a connection that
// black-holes) must not hold the work past the deadline.
type keeper struct {
	r        *Runner
	lease    store.Lease
	stopWork context.CancelCauseFunc
	cancel   context.CancelFunc // ends the renewal loop
	done     chan struct{}      // closed when the renewal loop has returned

	mu         sync.Mutex
	deadline   time.Time   // local: last successful renewal sent + ttl - margin
	timer      *time.Timer // fires expire at deadline
	lastErr    error       // of the last failed renewal since a success
	lost       *LostError
	definitive bool // lost by the store's answer, not presumed
	stopped    bool // shutdown: the work has returned
}

// startKeeper starts keeping l, acquired by a request sent at at.
func startKeeper(ctx context.Context, r *Runner, l store.Lease, at time.Time, stopWork context.CancelCauseFunc) *keeper {
	ctx, cancel := context.WithCancel(ctx)
	k := &keeper{r: r, lease: l, stopWork: stopWork, cancel: cancel, done: make(chan struct{}),
		deadline: at.Add(r.ttl - r.margin)}
	k.timer = time.AfterFunc(time.Until(k.deadline), k.expire)
	go func() {
		defer close(k.done)
		k.run(ctx, at)
	}()
	return k
}

// run renews every ttl/3 from the last success; after a failure it
// retries sooner, with backoff, until a renewal succeeds or the lease is
// lost.
func (k *keeper) run(ctx context.Context, from time.Time) {
	every := k.r.ttl / 3
	retry := newBackoff(max(every/8, time.Millisecond), max(every/2, time.Millisecond))
	failures := 0
	t := time.NewTimer(time.Until(from.Add(every)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		err := k.renew(ctx, sent, every)
		var next time.Time
		switch {
		case err == nil:
			if !k.renewed(sent) {
				return // the deadline passed while the renewal was on its way
			}
			if failures > 0 {
				k.r.log.Info("lease renewed again", "token", k.lease.Token, "failed_attempts", failures)
			}
			failures = 0
			retry.Reset()
			next = sent.Add(every)
		case errors.Is(err, store.ErrLeaseLost):
			k.lose(err)
			return
		case ctx.Err() != nil:
			return
		default:
			failures++
			wait := retry.NextBackOff()
			k.failed(err, wait)
			next = time.Now().Add(wait)
		}
		t.Reset(time.Until(next))
	}
}

// renew makes one renewal, given up after every (a hung call is better
// retried) and at the deadline (it could not help any more).
func (k *keeper) renew(ctx context.Context, sent time.Time, every time.Duration) error {
	k.mu.Lock()
	until := k.deadline
	k.mu.Unlock()
	if limit := sent.Add(every); limit.Before(until) {
		until = limit
	}
	rctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	_, err := k.r.st.RenewLease(rctx, k.lease, k.r.ttl) // the token is unchanged by a renewal
	return err
}

// renewed moves the deadline after a renewal sent at sent succeeded. It
// reports false if the lease was given up meanwhile: once the deadline
// has passed the work is being stopped, and a late success does not bring
// it back.
func (k *keeper) renewed(sent time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost != nil || k.stopped || !k.timer.Stop() {
		return false
	}
	k.deadline = sent.Add(k.r.ttl - k.r.margin)
	k.timer.Reset(time.Until(k.deadline))
	k.lastErr = nil
	return true
}

// failed records a transient renewal failure.
func (k *keeper) failed(err error, retryIn time.Duration) {
	k.mu.Lock()
	k.lastErr = err
	left := time.Until(k.deadline)
	k.mu.Unlock()
	metrics.LeaseEvent(k.r.kind, metrics.LeaseRenewFailed)
	k.r.log.Warn("lease renewal failed; retrying until the local deadline", "token", k.lease.Token,
		"err", err, "retry_in", retryIn, "deadline_in", left.Round(time.Millisecond))
}

// lose stops the work at once: the store says the lease is not ours.
func (k *keeper) lose(err error) {
	k.mu.Lock()
	if k.lost != nil || k.stopped {
		k.mu.Unlock()
		return
	}
	k.timer.Stop()
	k.lost = &LostError{Name: k.lease.Name, Holder: k.lease.Holder, Token: k.lease.Token, Err: err}
	k.definitive = true
	lost := k.lost
	k.mu.Unlock()
	k.stopWork(lost)
	metrics.LeaseEvent(k.r.kind, metrics.LeaseLost)
	k.r.log.Warn("lease lost; stopping the work", "token", k.lease.Token, "err", err)
}

// expire runs at the deadline: the lease is presumed lost, and the work
// is stopped before the store can let another replica take it.
func (k *keeper) expire() {
	k.mu.Lock()
	if k.lost != nil || k.stopped {
		k.mu.Unlock()
		return
	}
	k.lost = &LostError{Name: k.lease.Name, Holder: k.lease.Holder, Token: k.lease.Token, Err: expired(k.lastErr)}
	lost := k.lost
	k.mu.Unlock()
	k.stopWork(lost)
	k.cancel() // renewing now would only keep the next holder waiting
	metrics.LeaseEvent(k.r.kind, metrics.LeaseExpired)
	k.r.log.Warn("lease not renewed in time, presumed lost; stopping the work", "token", k.lease.Token, "err", lost.Err)
}

// shutdown stops keeping the lease once the work has returned (calling
// it again is harmless) and reports whether, and how, it was lost.
func (k *keeper) shutdown() (lost *LostError, definitive bool) {
	k.mu.Lock()
	k.stopped = true
	k.timer.Stop()
	lost, definitive = k.lost, k.definitive
	k.mu.Unlock()
	k.cancel()
	<-k.done
	return lost, definitive
}

// newBackoff returns exponential delays from initial up to maxDelay, with a
// little jitter so that replicas do not retry in step.
func newBackoff(initial, maxDelay time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{InitialInterval: initial, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: maxDelay}
	b.Reset()
	return b
}
