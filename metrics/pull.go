package metrics

import "github.com/prometheus/client_golang/prometheus"

// Kinds of cacheable pull responses (PullCacheable).
const (
	PullWhole    = "whole"    // a whole page: from a cursor, not at the live end
	PullStart    = "start"    // a first page without a cursor (a snapshot's)
	PullLive     = "live"     // a page at the live end, collapsed on its key
	PullConflict = "conflict" // a 409 resume_impossible naming where to restart
)

var (
	pullCollapsed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_pull_collapsed_total",
		Help: "Pull requests answered with the page another identical request in flight (or just answered) made: no subscription, no encoding of their own.",
	}, []string{"stream"})
	pullCacheable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_pull_cacheable_total",
		Help: "Pull responses a shared cache may keep (--pull-cache), by stream and kind: whole, start, live, conflict.",
	}, []string{"stream", "kind"})
)

func init() { Registry.MustRegister(pullCollapsed, pullCacheable) }

// PullCollapsed counts a pull request answered with another's page.
func PullCollapsed(stream string) { pullCollapsed.WithLabelValues(stream).Inc() }

// PullCacheable counts a cacheable pull response of kind.
func PullCacheable(stream, kind string) { pullCacheable.WithLabelValues(stream, kind).Inc() }
