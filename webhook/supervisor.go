package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Supervisor runs on every replica. It periodically lists the webhooks and
// tries to take the lease of each active one it does not deliver yet; the
// replica that gets a lease delivers that webhook until it loses the lease
// or the webhook is paused, disabled or deleted. A replica that dies stops
// renewing, and another replica takes over once the lease expires.
type Supervisor struct {
	s      *Service
	holder string
	ttl    time.Duration
	scan   time.Duration

	mu   sync.Mutex
	runs map[string]*run
	wg   sync.WaitGroup
}

type run struct {
	d      *deliverer
	cancel context.CancelFunc
	// deleted: the webhook vanished; clean up after the deliverer stops
	// (it may have written its cursor after the delete).
	deleted bool
}

// SupervisorOption configures a Supervisor.
type SupervisorOption func(*Supervisor)

// WithHolder sets the lease holder name (default host/pid/random).
func WithHolder(h string) SupervisorOption { return func(sv *Supervisor) { sv.holder = h } }

// WithLeaseTTL sets how long a lease lasts without renewal: the longest a
// webhook stays undelivered after its replica dies.
func WithLeaseTTL(d time.Duration) SupervisorOption { return func(sv *Supervisor) { sv.ttl = d } }

// WithScanInterval sets how often the webhooks are listed.
func WithScanInterval(d time.Duration) SupervisorOption { return func(sv *Supervisor) { sv.scan = d } }

// DefaultLeaseTTL is the default webhook lease time.
const DefaultLeaseTTL = 15 * time.Second

// NewSupervisor returns a supervisor; Run starts it.
func (s *Service) NewSupervisor(opts ...SupervisorOption) *Supervisor {
	sv := &Supervisor{s: s, holder: defaultHolder(), ttl: DefaultLeaseTTL, runs: map[string]*run{}}
	for _, o := range opts {
		o(sv)
	}
	if sv.scan <= 0 {
		// Scanning a few times per lease period bounds takeover at about
		// ttl + ttl/4.
		sv.scan = min(max(sv.ttl/4, 50*time.Millisecond), 2*time.Second)
	}
	return sv
}

func defaultHolder() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Holder returns this replica's lease holder name.
func (sv *Supervisor) Holder() string { return sv.holder }

// Run scans until ctx ends, then stops every deliverer, releases their
// leases (so another replica takes over at once rather than after the
// TTL) and returns.
func (sv *Supervisor) Run(ctx context.Context) {
	sv.s.log.Info("webhook supervisor started", "holder", sv.holder, "lease_ttl", sv.ttl, "scan", sv.scan)
	t := time.NewTicker(sv.scan)
	defer t.Stop()
	for {
		sv.scanOnce(ctx)
		select {
		case <-ctx.Done():
			sv.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// Delivering returns the ids of the webhooks this replica delivers.
func (sv *Supervisor) Delivering() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	ids := make([]string, 0, len(sv.runs))
	for id := range sv.runs {
		ids = append(ids, id)
	}
	return ids
}

func (sv *Supervisor) scanOnce(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	s := sv.s
	list, err := s.repo.list(ctx, "")
	if err != nil {
		s.log.Warn("webhook supervisor: cannot list webhooks", "err", err)
		return
	}
	statuses, err := s.repo.statuses(ctx)
	if err != nil {
		s.log.Warn("webhook supervisor: cannot list webhook statuses", "err", err)
		return
	}
	seen := make(map[string]bool, len(list))
	dead := 0
	for _, w := range list {
		seen[w.ID] = true
		if n, err := s.st.LogLen(ctx, dlqLog(w.ID)); err == nil {
			dead += n
		}
		eligible := !w.Paused && !statuses[w.ID].disabled()
		var def *streams.Definition
		if eligible {
			if def, err = s.streams.Get(ctx, w.Stream); err != nil {
				if !errors.Is(err, streams.ErrNotFound) {
					s.log.Warn("webhook supervisor: cannot load stream", "webhook", w.ID, "stream", w.Stream, "err", err)
				}
				eligible = false
			}
		}
		sv.mu.Lock()
		r := sv.runs[w.ID]
		sv.mu.Unlock()
		if r != nil {
			if eligible {
				r.d.wh.Store(w)
			} else {
				r.cancel()
			}
			continue
		}
		if !eligible {
			continue
		}
		asked := time.Now()
		l, err := s.st.AcquireLease(ctx, leaseName(w.ID), sv.holder, sv.ttl)
		if err != nil {
			if !errors.Is(err, store.ErrLeaseHeld) && ctx.Err() == nil {
				s.log.Warn("webhook supervisor: cannot acquire lease", "webhook", w.ID, "err", err)
			}
			continue
		}
		sv.start(ctx, w, def, l, asked.Add(sv.ttl))
	}
	// Every replica reports the same total: aggregate with max, not sum.
	metrics.WebhookDeadLetters(dead)
	sv.mu.Lock()
	for id, r := range sv.runs {
		if !seen[id] {
			r.deleted = true
			r.cancel()
		}
	}
	sv.mu.Unlock()
}

func (st *Status) disabled() bool { return st != nil && st.Disabled }

// start runs a deliverer for w under lease l, and keeps the lease renewed
// while it runs. expires is when the lease must be presumed lost unless
// renewed.
func (sv *Supervisor) start(parent context.Context, w *Webhook, def *streams.Definition, l store.Lease, expires time.Time) {
	s := sv.s
	ctx, cancel := context.WithCancel(parent)
	r := &run{d: newDeliverer(s, def, w, l), cancel: cancel}
	sv.mu.Lock()
	sv.runs[w.ID] = r
	sv.mu.Unlock()
	s.metrics.leases.Inc()
	r.d.log.Info("webhook lease acquired; delivering", "holder", sv.holder)
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			sv.keepLease(ctx, cancel, r.d, expires)
		}()
		err := r.d.run(ctx)
		cancel()
		<-renewed
		sv.finish(w, r, err)
	}()
}

// keepLease renews the lease every ttl/3 until ctx ends. When the lease is
// lost — or not renewed by the time it may have expired — the deliverer is
// cancelled: its fenced writes would fail anyway, and it must stop sending
// before another replica may start. Expiry is judged conservatively, from
// when each renewal was asked for, not from when it was answered.
func (sv *Supervisor) keepLease(ctx context.Context, cancel context.CancelFunc, d *deliverer, expires time.Time) {
	every := sv.ttl / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	expiry := time.NewTimer(time.Until(expires))
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			d.log.Warn("webhook lease not renewed in time, presumed lost; stopping")
			cancel()
			return
		case <-tick.C:
		}
		asked := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, every)
		_, err := sv.s.st.RenewLease(rctx, d.lease, sv.ttl) // the token is unchanged by a renewal
		rcancel()
		switch {
		case err == nil:
			expiry.Reset(time.Until(asked.Add(sv.ttl)))
		case errors.Is(err, store.ErrLeaseLost):
			d.log.Warn("webhook lease lost; stopping")
			cancel()
			return
		case ctx.Err() != nil:
			return
		default:
			d.log.Warn("webhook lease renewal failed", "err", err)
		}
	}
}

// finish releases the lease and, for a deleted webhook, removes what the
// deliverer may have written after the delete.
func (sv *Supervisor) finish(w *Webhook, r *run, err error) {
	s := sv.s
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rerr := s.st.ReleaseLease(ctx, r.d.lease); rerr != nil && !errors.Is(rerr, store.ErrLeaseLost) {
		r.d.log.Warn("webhook lease not released", "err", rerr)
	}
	sv.mu.Lock()
	deleted := r.deleted
	if sv.runs[w.ID] == r {
		delete(sv.runs, w.ID)
	}
	sv.mu.Unlock()
	s.metrics.leases.Dec()
	s.metrics.forget(w.ID)
	if deleted {
		if _, gerr := s.repo.get(ctx, w.ID); errors.Is(gerr, ErrNotFound) {
			s.repo.forget(ctx, w.ID)
			s.cursors.Delete(ctx, w.Stream, w.Subscriber())
		}
	}
	switch {
	case errors.Is(err, ErrGone):
		r.d.log.Warn("webhook delivery stopped: disabled by the receiver")
	default:
		r.d.log.Info("webhook delivery stopped", "reason", stopReason(err))
	}
}

func stopReason(err error) string {
	switch {
	case err == nil:
		return "done"
	case errors.Is(err, store.ErrFenced):
		return "lease lost (fenced)"
	case errors.Is(err, context.Canceled), errors.Is(err, errStopped):
		return "stopped (paused, deleted, lease lost or shutting down)"
	default:
		return err.Error()
	}
}
