// Package lease runs work on one replica at a time under a store lease.
//
// A Runner takes the named lease (waiting while another replica holds it),
// runs the work, renews the lease every third of its ttl while the work
// runs, and releases it once the work has returned, so that another
// replica can take over at once.
//
// Transient store errors do not interrupt the work: the holder keeps
// renewing. But a holder that cannot renew cannot know whether it still
// holds the lease, so it presumes it lost at a local deadline: when the
// last successful renewal (or the acquisition) was sent, plus the ttl,
// minus a safety margin, measured on the local monotonic clock. The store
// computed that lease's expiry after receiving the request, so no other
// replica can take the lease before the deadline plus the margin: the
// work's context is cancelled at the deadline, while the lease is still
// ours. A definitive answer from the store (the lease was taken over,
// revoked, or expired there) cancels it at once.
//
// Cancelling is not stopping: work that ignores its context, or a process
// frozen past the deadline, can still act after another replica took over.
// Its store writes are refused all the same: the work is handed the lease,
// whose Token it passes to store.PutFenced and store.AppendFenced.
package lease

import (
	"context"
	"errors"
	"fmt"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"log/slog"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// Store is the part of store.Store a Runner uses.
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error)
	RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error)
	ReleaseLease(ctx context.Context, l store.Lease) error
}

// Work is what the holder does while it holds the lease. ctx is cancelled
// when the lease is lost or presumed lost, with a *LostError as its cause
// (context.Cause), or when Run's context ends; Work must then return
// promptly. l.Token is the fencing token for every store write Work makes.
type Work func(ctx context.Context, l store.Lease) error

// Runner runs work under one named lease. It is cheap: make one per lease
// name. Run may be called again after it returned, never concurrently:
// two Runs of one holder would take the lease from each other.
type Runner struct {
	st     Store
	name   string
	holder string
	ttl    time.Duration
	kind   string
	log    *slog.Logger

	margin         time.Duration
	retryInitial   time.Duration
	retryMax       time.Duration
	releaseTimeout time.Duration
}

// New returns a runner of lease name for holder (unique per replica). ttl
// is how long the lease lasts without renewal in the store: the longest
// the work stays undone after its replica dies.
func New(st Store, name, holder string, ttl time.Duration, opts ...Option) *Runner {
	r := &Runner{st: st, name: name, holder: holder, ttl: ttl, kind: "lease", log: slog.Default(),
		margin: ttl / 4, retryInitial: ttl / 16, retryMax: ttl / 4, releaseTimeout: min(ttl, 5*time.Second)}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.With("lease", name, "holder", holder, "kind", r.kind)
	return r
}

func (r *Runner) check() error {
	var problem string
	switch {
	case r.name == "" || r.holder == "":
		problem = "empty name or holder"
	case r.ttl < 3*time.Millisecond:
		problem = fmt.Sprintf("ttl %v is shorter than 3ms", r.ttl)
	case r.margin < 0 || r.margin >= r.ttl/2:
		problem = fmt.Sprintf("safety margin %v is not in [0, ttl/2) for ttl %v", r.margin, r.ttl)
	case r.retryInitial <= 0 || r.retryMax < r.retryInitial:
		problem = fmt.Sprintf("retry delays %v..%v are not increasing", r.retryInitial, r.retryMax)
	case r.releaseTimeout <= 0:
		problem = fmt.Sprintf("release timeout %v is not positive", r.releaseTimeout)
	default:
		return nil
	}
	return fmt.Errorf("lease %q: %s", r.name, problem)
}

// Run takes the lease, waiting while another replica holds it or the
// store fails, runs work while holding it, and releases it once work has
// returned (unless the store said it was lost).
//
// It returns ctx's error if ctx ends before the lease is taken, a
// *LostError (errors.Is ErrLost) if the lease was lost while work ran,
// and otherwise what work returned.
func (r *Runner) Run(ctx context.Context, work Work) error {
	if err := r.check(); err != nil {
		return err
	}
	l, at, err := r.acquire(ctx)
	if err != nil {
		return err
	}
	return r.hold(ctx, l, at, work)
}

// hold runs work under l, acquired by a request sent at at.
func (r *Runner) hold(ctx context.Context, l store.Lease, at time.Time, work Work) error {
	wctx, stopWork := context.WithCancelCause(ctx)
	defer stopWork(nil)
	// Renewals go on after ctx ends, until work has returned: the lease
	// must outlive whatever the work does while it winds down.
	k := startKeeper(context.WithoutCancel(ctx), r, l, at, stopWork)
	defer k.shutdown() // also when work panics

	err := work(wctx, l)
	lost, definitive := k.shutdown()
	if !definitive {
		// After a presumed loss the store may still have the lease under
		// our token (renewals failed only on the way back): releasing it
		// lets the next holder in now rather than at its expiry.
		r.release(ctx, l)
	}
	if lost != nil {
		return lost
	}
	return err
}

// acquire takes the lease, retrying with backoff. at is when the request
// that got it was sent: the store computed the expiry after that.
func (r *Runner) acquire(ctx context.Context) (l store.Lease, at time.Time, err error) {
	b := newBackoff(r.retryInitial, r.retryMax)
	waiting := false
	for {
		at = time.Now()
		actx, cancel := context.WithTimeout(ctx, r.ttl/3)
		l, err = r.st.AcquireLease(actx, r.name, r.holder, r.ttl)
		cancel()
		if err == nil {
			metrics.LeaseEvent(r.kind, metrics.LeaseAcquired)
			r.log.Info("lease acquired", "token", l.Token, "ttl", r.ttl)
			return l, at, nil
		}
		if ctx.Err() != nil {
			return store.Lease{}, time.Time{}, ctx.Err()
		}
		delay := b.NextBackOff()
		if errors.Is(err, store.ErrLeaseHeld) {
			if !waiting {
				r.log.Debug("lease held by another replica; waiting for it", "err", err)
				waiting = true
			}
		} else {
			metrics.LeaseEvent(r.kind, metrics.LeaseAcquireFailed)
			r.log.Warn("lease acquisition failed; retrying", "err", err, "retry_in", delay)
		}
		if err := wait.Sleep(ctx, delay); err != nil {
			return store.Lease{}, time.Time{}, err
		}
	}
}

// release gives l back, bounded by the release timeout even when ctx has
// ended (shutdown is when releasing matters most).
func (r *Runner) release(ctx context.Context, l store.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.releaseTimeout)
	defer cancel()
	switch err := r.st.ReleaseLease(rctx, l); {
	case err == nil:
		metrics.LeaseEvent(r.kind, metrics.LeaseReleased)
		r.log.Info("lease released", "token", l.Token)
	case errors.Is(err, store.ErrLeaseLost):
		r.log.Debug("lease already gone at release", "token", l.Token, "err", err)
	default:
		r.log.Warn("lease not released; another replica can take it once it expires", "token", l.Token, "err", err)
	}
}
