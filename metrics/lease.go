package metrics

import "github.com/prometheus/client_golang/prometheus"

// Lease kinds: what a store lease elects one replica for.
const (
	LeaseWebhook        = "webhook"
	LeaseJournalWatcher = "journal_watcher"
	// LeaseMoveBridges: the bridges of one MoveTables cutover's named
	// subscribers (DESIGN §4.1 rule 5).
	LeaseMoveBridges = "movetables_bridges"
)

// Lease events, as counted by LeaseEvent.
const (
	// LeaseAcquired: this replica took the lease and started its work.
	LeaseAcquired = "acquired"
	// LeaseAcquireFailed: taking the lease failed for a reason other than
	// another holder having it (the store is unreachable, say).
	LeaseAcquireFailed = "acquire_failed"
	// LeaseRenewFailed: a renewal failed transiently; the holder keeps the
	// lease and retries until its local deadline.
	LeaseRenewFailed = "renew_failed"
	// LeaseLost: the store said the lease is no longer held (taken over,
	// revoked, or expired there).
	LeaseLost = "lost"
	// LeaseExpired: no renewal succeeded before the local deadline; the
	// lease is presumed lost and the work stopped.
	LeaseExpired = "expired"
	// LeaseReleased: the holder gave the lease back (shutdown, or its work
	// ended), so another replica can take it at once.
	LeaseReleased = "released"
)

var leaseEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vsg_lease_events_total",
	Help: "Store lease events on this replica by kind (webhook, journal_watcher, movetables_bridges) and event: acquired, acquire_failed, renew_failed (transient, lease kept), lost, expired (presumed lost at the local deadline), released.",
}, []string{"kind", "event"})

func init() {
	Registry.MustRegister(leaseEvents)
	// Series that exist from the start, so that alerts on increase() see
	// the first loss.
	for _, k := range []string{LeaseWebhook, LeaseJournalWatcher, LeaseMoveBridges} {
		for _, e := range []string{LeaseAcquired, LeaseAcquireFailed, LeaseRenewFailed, LeaseLost, LeaseExpired, LeaseReleased} {
			leaseEvents.WithLabelValues(k, e)
		}
	}
}

// LeaseEvent counts one event (Lease* above) of a lease of kind.
func LeaseEvent(kind, event string) { leaseEvents.WithLabelValues(kind, event).Inc() }
