package metrics

import "github.com/prometheus/client_golang/prometheus"

// The store's failure modes (DESIGN §12): a store that lost its data, and
// acks that could not be stored at once.
var (
	storeDataLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vsg_store_data_lost_total",
		Help: "Times this replica found that the store had lost its data (its epoch record vanished or was replaced: a Redis restarted without persistence, flushed, or replaced).",
	})
	storeRecovering = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vsg_store_recovering",
		Help: "1 while this replica has not finished restoring what it can after the store lost its data (/readyz fails meanwhile).",
	})
	storeRestored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_store_restored_total",
		Help: "Records this replica wrote back after the store lost its data, by kind: streams (from --streams-file), cursors (subscriber cursors it had stored), cursor_key.",
	}, []string{"kind"})
	lostCursorResyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vsg_store_lost_cursor_resyncs_total",
		Help: "Named subscribers that connected without a stored cursor after the store lost its data, and were sent a resync (reason store_lost) and a fresh snapshot instead of starting silently from the stream's start.",
	})
	acksRetried = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_acks_retried_total",
		Help: "WebSocket and SSE acks that could not be stored at once (store unavailable) and were retried in the background, by transport.",
	}, []string{"transport"})
	acksFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_acks_failed_total",
		Help: "WebSocket and SSE acks given up when their connection ended with the store still unavailable (the subscriber resumes from its previous cursor: repeats, no loss), by transport.",
	}, []string{"transport"})
)

func init() {
	Registry.MustRegister(storeDataLost, storeRecovering, storeRestored, lostCursorResyncs, acksRetried, acksFailed)
	for _, k := range []string{"streams", "cursors", "cursor_key"} {
		storeRestored.WithLabelValues(k)
	}
	for _, t := range []string{TransportSSE, TransportWS} {
		acksRetried.WithLabelValues(t)
		acksFailed.WithLabelValues(t)
	}
}

// StoreDataLost counts a loss of the store's data found by this replica.
func StoreDataLost() { storeDataLost.Inc() }

// StoreRecovering says whether recovery after a loss is still incomplete.
func StoreRecovering(on bool) {
	if on {
		storeRecovering.Set(1)
	} else {
		storeRecovering.Set(0)
	}
}

// StoreRestored counts n records of kind written back after a loss.
func StoreRestored(kind string, n int) {
	if n > 0 {
		storeRestored.WithLabelValues(kind).Add(float64(n))
	}
}

// LostCursorResync counts a subscriber resynced for a cursor lost with the
// store's data.
func LostCursorResync() { lostCursorResyncs.Inc() }

// AckRetried counts an ack of transport retried in the background.
func AckRetried(transport string) { acksRetried.WithLabelValues(transport).Inc() }

// AckFailed counts an ack of transport given up.
func AckFailed(transport string) { acksFailed.WithLabelValues(transport).Inc() }
