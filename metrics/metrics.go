// Package metrics holds the gateway's Prometheus metrics. Packages record
// through the functions here rather than touching collectors, so label
// names and values stay consistent (and bounded) across the code base.
//
// Names follow the Prometheus conventions: a vsg_ prefix, _total for
// counters, base units (seconds, bytes) in the name.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds every gateway metric, plus the Go runtime and process
// collectors. It is not the global default registry, so that libraries
// registering there (vitess does) do not leak into /metrics.
var Registry = prometheus.NewRegistry()

// Transports label client-facing metrics.
const (
	TransportPull    = "pull"
	TransportSSE     = "sse"
	TransportWS      = "ws"
	TransportWebhook = "webhook"
)

// Rebuild outcomes of a cursor checked against the topology on (re)connect
// (DESIGN §4): passed through, rebuilt exactly from journals, bridged
// through a spool, resynced from a snapshot, or failed.
const (
	RebuildPassthrough = "passthrough"
	RebuildExact       = "exact"
	RebuildBridged     = "bridged"
	RebuildResync      = "resync"
	RebuildFailed      = "failed"
)

var (
	tails = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vsg_tails",
		Help: "Running stream tails (one upstream VStream shared by every caught-up reader of a stream), by stream.",
	}, []string{"stream"})
	ringEntries = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vsg_tail_ring_entries",
		Help: "Transactions held in a stream tail's history ring.",
	}, []string{"stream"})
	ringBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vsg_tail_ring_bytes",
		Help: "Bytes of encoded events held in a stream tail's history ring.",
	}, []string{"stream"})
	tailJoins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_tail_joins_total",
		Help: "Readers that joined a stream tail: direct (their cursor was in the ring) or caught_up (after a catch-up VStream of their own).",
	}, []string{"stream", "how"})
	tailLeaves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_tail_leaves_total",
		Help: "Readers that left a stream tail for a VStream of their own: fell_behind (slower than the ring is long) or tail_stopped.",
	}, []string{"stream", "reason"})
	eventsIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_events_in_total",
		Help: "Events read from vtgate, by stream: once per VStream the gateway runs (a stream's tail counts each event once, whatever the number of readers following it).",
	}, []string{"stream"})
	eventsOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_events_out_total",
		Help: "Events sent to clients, by stream and transport.",
	}, []string{"stream", "transport"})
	eventsFiltered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_events_filtered_total",
		Help: "Events withheld from a client because its token's tables claim does not cover them.",
	}, []string{"stream", "transport"})
	lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vsg_lag_seconds",
		Help: "Seconds between the commit of the last transaction sent on a stream and its sending (commit times have whole-second resolution).",
	}, []string{"stream"})
	clients = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vsg_clients",
		Help: "Connected clients by transport (open SSE and WebSocket connections, in-flight pulls).",
	}, []string{"transport"})
	cursorWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_cursor_writes_total",
		Help: "Subscriber cursors written to the store, by stream.",
	}, []string{"stream"})
	rebuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_cursor_rebuilds_total",
		Help: "Cursor checks on (re)connect by outcome: passthrough, exact, bridged, resync, failed.",
	}, []string{"outcome"})
	journalGaps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_journal_gaps_total",
		Help: "Reshards whose journal the gateway missed for good (the journal watcher's position was on deleted shards and no recorded journal continued it), by keyspace: see GET /v1/reshards.",
	}, []string{"keyspace"})
	authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_auth_failures_total",
		Help: "Requests refused for their token, by reason (missing, expired, bad_signature, …).",
	}, []string{"reason"})
	refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_requests_refused_total",
		Help: "Authenticated requests refused, by reason: forbidden (scope), rate_limited (admin API), too_many_connections, origin.",
	}, []string{"reason"})
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_http_requests_total",
		Help: "HTTP requests by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vsg_http_request_duration_seconds",
		Help:    "HTTP request duration by route pattern (streams and long-polls last as long as the client stays).",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 120, 600},
	}, []string{"route", "method"})
	webhookAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_webhook_attempts_total",
		Help: "Webhook delivery attempts by outcome (success, retry, disabled, dead_letter).",
	}, []string{"outcome"})
	streamClients = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vsg_stream_clients",
		Help: "Connected clients by stream and transport (open SSE and WebSocket connections, in-flight pulls).",
	}, []string{"stream", "transport"})
	wsDisconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vsg_ws_disconnects_total",
		Help: "WebSocket connections the gateway closed, by reason: slow_consumer, upstream_failed, bad_message, shutdown.",
	}, []string{"reason"})
	webhookDeadLetters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vsg_webhook_dead_letters",
		Help: "Batches in webhook dead-letter lists.",
	})
)

func init() {
	Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		eventsIn, eventsOut, eventsFiltered, lag, clients, cursorWrites, rebuilds, journalGaps,
		authFailures, refusals, httpRequests, httpDuration, webhookAttempts, webhookDeadLetters,
		wsDisconnects, streamClients, tails, ringEntries, ringBytes, tailJoins, tailLeaves,
	)
	// Series that exist from the start, so that rate() and alerts see a 0
	// rather than nothing before the first occurrence.
	for _, o := range []string{RebuildPassthrough, RebuildExact, RebuildBridged, RebuildResync, RebuildFailed} {
		rebuilds.WithLabelValues(o)
	}
	for _, t := range []string{TransportPull, TransportSSE, TransportWS} {
		clients.WithLabelValues(t)
	}
	for _, r := range []string{"slow_consumer", "upstream_failed", "bad_message", "shutdown"} {
		wsDisconnects.WithLabelValues(r)
	}
}

// Handler serves the registry in the Prometheus exposition format.
func Handler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}

// TailStarted and TailStopped track the running stream tails.
func TailStarted(stream string) { tails.WithLabelValues(stream).Inc() }

// TailStopped: see TailStarted. The ring gauges go with the tail.
func TailStopped(stream string) {
	tails.WithLabelValues(stream).Dec()
	ringEntries.DeleteLabelValues(stream)
	ringBytes.DeleteLabelValues(stream)
}

// TailRing reports a tail's ring fill.
func TailRing(stream string, entries, bytes int) {
	ringEntries.WithLabelValues(stream).Set(float64(entries))
	ringBytes.WithLabelValues(stream).Set(float64(bytes))
}

// TailJoins counts a reader joining a tail ("direct" or "caught_up").
func TailJoins(stream, how string) { tailJoins.WithLabelValues(stream, how).Inc() }

// TailLeaves counts a reader leaving a tail ("fell_behind", "tail_stopped").
func TailLeaves(stream, reason string) { tailLeaves.WithLabelValues(stream, reason).Inc() }

// EventsIn counts n events read from vtgate for stream.
func EventsIn(stream string, n int) {
	if n > 0 {
		eventsIn.WithLabelValues(stream).Add(float64(n))
	}
}

// Outbound returns the counters one client connection updates, resolved
// once so that the per-event path is an atomic add, not a label lookup.
func Outbound(stream, transport string) *Out {
	return &Out{
		sent:     eventsOut.WithLabelValues(stream, transport),
		filtered: eventsFiltered.WithLabelValues(stream, transport),
		lag:      lag.WithLabelValues(stream),
	}
}

// Out is one connection's view of the outbound metrics.
type Out struct {
	sent, filtered prometheus.Counter
	lag            prometheus.Gauge
}

// Sent records n events sent and withheld events not sent; lagSeconds is
// recorded when the transaction has a commit time (>= 0).
func (o *Out) Sent(n, withheld int, lagSeconds float64) {
	if n > 0 {
		o.sent.Add(float64(n))
	}
	if withheld > 0 {
		o.filtered.Add(float64(withheld))
	}
	if lagSeconds >= 0 {
		o.lag.Set(lagSeconds)
	}
}

// ClientConnected counts a client of transport reading stream in; call the
// returned function when it leaves.
func ClientConnected(stream, transport string) (done func()) {
	g, s := clients.WithLabelValues(transport), streamClients.WithLabelValues(stream, transport)
	g.Inc()
	s.Inc()
	return func() { g.Dec(); s.Dec() }
}

// CursorWrite counts one subscriber cursor stored for stream.
func CursorWrite(stream string) { cursorWrites.WithLabelValues(stream).Inc() }

// CursorRebuild counts one cursor check with its outcome (Rebuild*).
func CursorRebuild(outcome string) { rebuilds.WithLabelValues(outcome).Inc() }

// JournalGap counts a reshard of keyspace whose journal was missed.
func JournalGap(keyspace string) { journalGaps.WithLabelValues(keyspace).Inc() }

// AuthFailure counts a request refused for its token (auth.Reason*).
func AuthFailure(reason string) { authFailures.WithLabelValues(reason).Inc() }

// Refused counts an authenticated request refused for reason.
func Refused(reason string) { refusals.WithLabelValues(reason).Inc() }

// HTTPRequest records one finished request. route is the router's pattern
// ("/v1/streams/{stream}/changes"), never the raw path, to keep the label
// set bounded.
func HTTPRequest(route, method string, code int, seconds float64) {
	httpRequests.WithLabelValues(route, method, statusText(code)).Inc()
	httpDuration.WithLabelValues(route, method).Observe(seconds)
}

// WSDisconnect counts a WebSocket the gateway closed for reason (the
// close reason sent, e.g. slow_consumer).
func WSDisconnect(reason string) { wsDisconnects.WithLabelValues(reason).Inc() }

// WebhookAttempt counts one webhook delivery attempt by outcome.
func WebhookAttempt(outcome string) { webhookAttempts.WithLabelValues(outcome).Inc() }

// WebhookDeadLetters sets how many batches are dead-lettered.
func WebhookDeadLetters(n int) { webhookDeadLetters.Set(float64(n)) }

func statusText(code int) string {
	if code >= 100 && code < 1000 {
		return string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)})
	}
	return "000"
}
