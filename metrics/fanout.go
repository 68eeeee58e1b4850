package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// wsWriteDelay splits a WebSocket reader's commit→receive latency: the
// gateway's share is from the moment its VStream received a transaction
// (source.Txn.Received) to the write of the transaction's last frame to
// the socket; the rest is vtgate's, the network's and the client's.
var wsWriteDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "vsg_ws_write_delay_seconds",
	Help:    "WebSocket transactions by the time from the gateway's receipt from vtgate to the write of their last frame to the socket.",
	Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30},
})

func init() { Registry.MustRegister(wsWriteDelay) }

// WSWritten records a transaction received at received, written at now
// (one clock read may serve a burst written at once).
func WSWritten(received, now time.Time) {
	if !received.IsZero() {
		wsWriteDelay.Observe(now.Sub(received).Seconds())
	}
}
