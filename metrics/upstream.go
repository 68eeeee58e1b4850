package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Upstream outages: a VStream that lost vtgate (vtgate restarting or down,
// a tablet gone) and waits to resume. Every VStream the gateway runs counts
// on its own, labelled with the stream it reads (a stream's tail, a
// catch-up, a bridge, the journal watcher of a keyspace).
var (
	upstreamInterruptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_upstream_interruptions_total",
		Help: "VStreams interrupted by a transient upstream failure (vtgate restarting or unreachable, a tablet gone), by stream.",
	}, []string{"stream"})
	upstreamOutage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vsg_upstream_outage_seconds",
		Help:    "How long an interrupted VStream waited for vtgate to stream again (observed when it resumed or was closed), by stream.",
		Buckets: []float64{.1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600},
	}, []string{"stream"})

	upstreamStalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_upstream_stalls_total",
		Help: "VStreams cancelled and reopened because vtgate sent nothing, not even a heartbeat, for --stall-timeout (a network dropping packets, a hung vtgate), by stream.",
	}, []string{"stream"})

	upstreamReparents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_upstream_reparents_total",
		Help: "Primary changes of a streamed shard seen by the gateway's primary watch (each reopens the shard's VStreams), by keyspace and shard.",
	}, []string{"keyspace", "shard"})

	upstreamUnavailableDesc = prometheus.NewDesc("vsg_upstream_unavailable",
		"VStreams waiting for vtgate now (interrupted, not yet streaming again), by stream.", []string{"stream"}, nil)
	upstreamUnavailableSecondsDesc = prometheus.NewDesc("vsg_upstream_unavailable_seconds",
		"How long the longest-waiting VStream of the stream has been without vtgate; 0 when none waits.", []string{"stream"}, nil)

	upstream = &upstreamWaits{byStream: map[string]map[*upstreamWait]struct{}{}}
)

func init() {
	Registry.MustRegister(upstreamInterruptions, upstreamOutage, upstreamStalls, upstreamReparents, upstream)
}

// upstreamWaits is the set of VStreams waiting for vtgate now. It is a
// collector so that the waiting time is current at every scrape.
type upstreamWaits struct {
	mu       sync.Mutex
	byStream map[string]map[*upstreamWait]struct{} // streams stay once seen, to report 0
}

type upstreamWait struct{ since time.Time }

func (u *upstreamWaits) Describe(ch chan<- *prometheus.Desc) {
	ch <- upstreamUnavailableDesc
	ch <- upstreamUnavailableSecondsDesc
}

func (u *upstreamWaits) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	for stream, waits := range u.byStream {
		longest := 0.0
		for w := range waits {
			longest = max(longest, now.Sub(w.since).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(upstreamUnavailableDesc, prometheus.GaugeValue, float64(len(waits)), stream)
		ch <- prometheus.MustNewConstMetric(upstreamUnavailableSecondsDesc, prometheus.GaugeValue, longest, stream)
	}
}

// UpstreamLost records that a VStream of stream lost vtgate at since. The
// returned function records the end of the outage (the VStream streams
// again, or was closed) and must be called exactly once.
func UpstreamLost(stream string, since time.Time) (ended func()) {
	w := &upstreamWait{since: since}
	upstreamInterruptions.WithLabelValues(stream).Inc()
	upstream.mu.Lock()
	if upstream.byStream[stream] == nil {
		upstream.byStream[stream] = map[*upstreamWait]struct{}{}
	}
	upstream.byStream[stream][w] = struct{}{}
	upstream.mu.Unlock()
	return func() {
		upstream.mu.Lock()
		delete(upstream.byStream[stream], w)
		upstream.mu.Unlock()
		upstreamOutage.WithLabelValues(stream).Observe(time.Since(since).Seconds())
	}
}

// UpstreamStalled counts a VStream of stream cancelled as stalled. The
// outage it starts (or continues) is recorded by UpstreamLost as any other.
func UpstreamStalled(stream string) { upstreamStalls.WithLabelValues(stream).Inc() }

// UpstreamReparent counts a change of the primary of keyspace/shard. The
// outages of the VStreams it reopens are recorded by UpstreamLost.
func UpstreamReparent(keyspace, shard string) {
	upstreamReparents.WithLabelValues(keyspace, shard).Inc()
}
