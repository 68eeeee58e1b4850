package lease

import (
	"log/slog"
	"time"
)

// Option configures a Runner.
type Option func(*Runner)

// WithLogger sets the logger (default slog.Default()). The runner adds the
// lease name, holder and kind to every line.
func WithLogger(l *slog.Logger) Option { return func(r *Runner) { r.log = l } }

// WithKind names what the lease elects a replica for (metrics.Lease*
// constants): the kind label of vsg_lease_events_total and of the log
// lines. Default "lease".
func WithKind(kind string) Option { return func(r *Runner) { r.kind = kind } }

// WithSafetyMargin sets how long before the earliest possible store-side
// expiry the work is stopped when renewals fail (default a quarter of the
// ttl). It is the time the work has to notice its cancelled context and
// stop before another replica may take over, and it absorbs timer and
// scheduling delays and any rate difference between the local clock and
// the store's. It must be below half the ttl.
func WithSafetyMargin(d time.Duration) Option { return func(r *Runner) { r.margin = d } }

// WithRetry sets the delays between acquisition attempts while another
// replica holds the lease or the store fails: they start at initial and
// double up to maxDelay, with some jitter so that replicas do not ask in step.
// Default ttl/16 up to ttl/4. maxDelay bounds how long after a release or an
// expiry the lease stays free.
func WithRetry(initial, maxDelay time.Duration) Option {
	return func(r *Runner) { r.retryInitial, r.retryMax = initial, maxDelay }
}

// WithReleaseTimeout bounds the release on the way out (default the
// ttl, at most 5s): past it, the lease is left to expire.
func WithReleaseTimeout(d time.Duration) Option { return func(r *Runner) { r.releaseTimeout = d } }
