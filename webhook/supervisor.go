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

	"github.com/vstream-gateway/vstream-gateway/lease"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Supervisor runs on every replica. It periodically lists the webhooks and
// starts, for each active one, a lease runner (package lease) that waits
// for the webhook's lease; the replica that gets it delivers the webhook
// until it loses the lease or the webhook is paused, disabled or deleted.
// A replica that dies stops renewing, and another replica takes over once
// the lease expires. Store errors do not interrupt delivery, but a
// replica that cannot renew stops delivering before its lease can expire
// in the store, so another replica starts only after it stopped (and a
// frozen replica that wakes up late finds its writes fenced).
type Supervisor struct {
	s      *Service
	holder string
	ttl    time.Duration
	scan   time.Duration

	mu   sync.Mutex
	runs map[string]*run
	wg   sync.WaitGroup
}

// run is one webhook's lease runner on this replica.
type run struct {
	cancel context.CancelFunc
	// d delivers while this replica holds the lease; nil while it waits
	// for it. Guarded by Supervisor.mu.
	d *deliverer
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
	for id, r := range sv.runs {
		if r.d != nil {
			ids = append(ids, id)
		}
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
		if eligible {
			if _, err = s.streams.Get(ctx, w.Stream); err != nil {
				if !errors.Is(err, streams.ErrNotFound) {
					s.log.Warn("webhook supervisor: cannot load stream", "webhook", w.ID, "stream", w.Stream, "err", err)
				}
				eligible = false
			}
		}
		sv.mu.Lock()
		r := sv.runs[w.ID]
		if r != nil {
			if !eligible {
				r.cancel()
			} else if r.d != nil {
				r.d.wh.Store(w)
			}
		}
		sv.mu.Unlock()
		if r == nil && eligible {
			sv.start(ctx, w)
		}
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

// start runs webhook w's lease runner: it waits for the lease, and
// delivers while it holds it.
func (sv *Supervisor) start(parent context.Context, w *Webhook) {
	ctx, cancel := context.WithCancel(parent)
	r := &run{cancel: cancel}
	sv.mu.Lock()
	sv.runs[w.ID] = r
	sv.mu.Unlock()
	// A held lease is asked for as often as the webhooks are listed, so a
	// replica takes over from a dead one within ttl + scan.
	lr := lease.New(sv.s.st, leaseName(w.ID), sv.holder, sv.ttl,
		lease.WithKind(metrics.LeaseWebhook), lease.WithLogger(sv.s.log.With("webhook", w.ID)),
		lease.WithRetry(max(sv.scan/4, time.Millisecond), max(sv.scan, time.Millisecond)))
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		err := lr.Run(ctx, func(ctx context.Context, l store.Lease) error { return sv.deliver(ctx, r, w.ID, l) })
		cancel()
		sv.finish(w, r, err)
	}()
}

// deliver runs while this replica holds webhook id's lease l. It reads
// the webhook afresh first: the scan that started the runner may predate
// the acquisition, and a pause or delete in between revokes the lease,
// which this replica may just have taken.
func (sv *Supervisor) deliver(ctx context.Context, r *run, id string, l store.Lease) error {
	s := sv.s
	w, def, err := sv.load(ctx, id)
	if w == nil || err != nil {
		return err // Run releases the lease
	}
	d := newDeliverer(s, def, w, l)
	sv.mu.Lock()
	r.d = d
	sv.mu.Unlock()
	s.metrics.leases.Inc()
	defer s.metrics.leases.Dec()
	d.log.Info("webhook delivery started", "holder", sv.holder)
	return d.run(ctx)
}

// load returns webhook id with its stream's definition, or nil if it is
// not to be delivered: deleted, paused, disabled, or its stream gone.
func (sv *Supervisor) load(ctx context.Context, id string) (*Webhook, *streams.Definition, error) {
	s := sv.s
	w, err := s.repo.get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil || w.Paused {
		return nil, nil, err
	}
	if st, err := s.repo.status(ctx, id); err != nil || st.disabled() {
		return nil, nil, err
	}
	def, err := s.streams.Get(ctx, w.Stream)
	if errors.Is(err, streams.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return w, def, nil
}

func (st *Status) disabled() bool { return st != nil && st.Disabled }

// finish forgets the run once its lease is released and, for a deleted
// webhook, removes what the deliverer may have written after the delete.
func (sv *Supervisor) finish(w *Webhook, r *run, err error) {
	s := sv.s
	sv.mu.Lock()
	d, deleted := r.d, r.deleted
	if sv.runs[w.ID] == r {
		delete(sv.runs, w.ID)
	}
	sv.mu.Unlock()
	if d == nil {
		// This replica did not deliver it: it stopped waiting for the
		// lease, or found the webhook no longer to be delivered.
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("webhook lease runner stopped", "webhook", w.ID, "err", err)
		}
		return
	}
	s.metrics.forget(w.ID)
	if deleted {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, gerr := s.repo.get(ctx, w.ID); errors.Is(gerr, ErrNotFound) {
			s.repo.forget(ctx, w.ID)
			s.cursors.Delete(ctx, w.Stream, w.Subscriber())
		}
	}
	switch {
	case errors.Is(err, ErrGone):
		d.log.Warn("webhook delivery stopped: disabled by the receiver")
	case errors.Is(err, ErrStreamEnded):
		d.log.Warn("webhook delivery stopped: disabled, its stream ended", "err", err)
	default:
		d.log.Info("webhook delivery stopped", "reason", stopReason(err))
	}
}

func stopReason(err error) string {
	switch {
	case err == nil:
		return "done"
	case errors.Is(err, lease.ErrExpired):
		return "lease presumed lost (not renewed in time)"
	case errors.Is(err, lease.ErrLost):
		return "lease lost"
	case errors.Is(err, store.ErrFenced):
		return "lease lost (fenced)"
	case errors.Is(err, context.Canceled), errors.Is(err, errStopped):
		return "stopped (paused, deleted, lease lost or shutting down)"
	default:
		return err.Error()
	}
}
