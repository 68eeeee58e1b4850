package webhook

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// Metrics are the per-webhook collectors. The gateway-wide webhook series
// (vsg_webhook_attempts_total{outcome}, vsg_webhook_dead_letters,
// vsg_events_out_total{transport="webhook"}, vsg_cursor_writes_total) are
// recorded through package metrics; these add what only makes sense per
// webhook. Series are labelled by webhook id: webhooks are few and
// operator-created, so the cardinality is bounded. The server registers
// them on metrics.Registry with Register.
type Metrics struct {
	deliveries *prometheus.CounterVec   // batches resolved, by outcome
	events     *prometheus.CounterVec   // events confirmed by a 2xx
	failures   *prometheus.CounterVec   // failed POSTs, by failure class
	requestDur *prometheus.HistogramVec // one POST
	latency    *prometheus.HistogramVec // gateway read → receiver's 2xx
	lag        *prometheus.GaugeVec     // age of the oldest unconfirmed commit
	inflight   *prometheus.GaugeVec     // batches sent and not resolved yet
	leases     prometheus.Gauge         // webhooks this replica delivers

	streams sync.Map // webhook id → stream, for Live
}

// NewMetrics returns unregistered collectors.
func NewMetrics() *Metrics {
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
	return &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vsg_webhook_deliveries_total",
			Help: "Webhook batches resolved, by webhook and outcome: delivered (2xx), dead_lettered, disabled (410).",
		}, []string{"webhook", "outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vsg_webhook_events_delivered_total",
			Help: "Events in webhook batches the receiver confirmed with a 2xx, by webhook.",
		}, []string{"webhook"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vsg_webhook_failures_total",
			Help: "Failed webhook attempts by webhook and class: timeout, connect, dns, blocked_address, network, http_3xx, http_4xx, http_4xx_retryable, http_429, http_5xx, gone.",
		}, []string{"webhook", "class"}),
		requestDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vsg_webhook_request_duration_seconds", Buckets: buckets,
			Help: "Duration of one webhook POST, by webhook.",
		}, []string{"webhook"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vsg_webhook_delivery_latency_seconds", Buckets: buckets,
			Help: "From the gateway reading a batch's first transaction to the receiver confirming the batch, retries included, by webhook.",
		}, []string{"webhook"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vsg_webhook_lag_seconds",
			Help: "Age of the oldest commit the receiver has not confirmed yet (0 when caught up), by webhook; reported by the delivering replica.",
		}, []string{"webhook"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vsg_webhook_batches_in_flight",
			Help: "Webhook batches this replica has sent and not resolved yet (being posted, or waiting for a retry), by webhook.",
		}, []string{"webhook"}),
		leases: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vsg_webhook_leases_held",
			Help: "Webhooks this replica currently delivers.",
		}),
	}
}

var defaultMetrics = NewMetrics()

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.deliveries, m.events, m.failures, m.requestDur, m.latency, m.lag, m.inflight, m.leases}
}

// Register registers the collectors services use by default on reg
// (metrics.Registry in the gateway). Registering twice is not an error.
func Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range defaultMetrics.Collectors() {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Outcomes of metrics.WebhookAttempt.
const (
	attemptSuccess    = "success"
	attemptRetry      = "retry"
	attemptDisabled   = "disabled"
	attemptDeadLetter = "dead_letter"
)

// observeAttempt records one POST; outcome is what it led to
// (attempt* constants).
func (m *Metrics) observeAttempt(id string, a *attempt, outcome string) {
	metrics.WebhookAttempt(outcome)
	if a.kind != "" {
		m.failures.WithLabelValues(id, a.kind).Inc()
	}
	m.requestDur.WithLabelValues(id).Observe(a.took.Seconds())
}

func (m *Metrics) delivered(id, stream string, b *batch, now time.Time) {
	m.deliveries.WithLabelValues(id, "delivered").Inc()
	m.events.WithLabelValues(id).Add(float64(b.events))
	lag := -1.0
	if b.firstCommit > 0 {
		lag = max(now.Sub(time.Unix(b.firstCommit, 0)).Seconds(), 0)
	}
	metrics.Outbound(stream, metrics.TransportWebhook).Sent(b.events, 0, lag)
	if !b.firstRecv.IsZero() {
		m.latency.WithLabelValues(id).Observe(now.Sub(b.firstRecv).Seconds())
	}
}

// setLag records the age of b's first transaction (nil: caught up).
func (m *Metrics) setLag(id string, b *batch, now time.Time) {
	var lag time.Duration
	switch {
	case b == nil:
	case b.firstCommit > 0:
		lag = now.Sub(time.Unix(b.firstCommit, 0))
	case !b.firstRecv.IsZero():
		lag = now.Sub(b.firstRecv)
	}
	m.lag.WithLabelValues(id).Set(max(lag, 0).Seconds())
}

// forget drops the gauges of a webhook this replica no longer delivers, so
// a stale value is not reported forever.
func (m *Metrics) forget(id string) {
	m.lag.DeleteLabelValues(id)
	m.inflight.DeleteLabelValues(id)
}

// batchStarted and batchEnded bracket one batch's delivery (every attempt
// and the waits between them).
func (m *Metrics) batchStarted(id, stream string) {
	m.streams.Store(id, stream)
	m.inflight.WithLabelValues(id).Inc()
}

func (m *Metrics) batchEnded(id string) { m.inflight.WithLabelValues(id).Dec() }

// Live returns this replica's numbers of every webhook it has delivered
// batches of, by id: what the console's charts sample (metrics.History).
func (m *Metrics) Live() map[string]metrics.WebhookLive {
	out := map[string]metrics.WebhookLive{}
	m.streams.Range(func(k, v any) bool {
		out[k.(string)] = metrics.WebhookLive{Stream: v.(string)}
		return true
	})
	update := func(id string, fn func(*metrics.WebhookLive)) {
		if w, ok := out[id]; ok {
			fn(&w)
			out[id] = w
		}
	}
	metrics.EachMetric(m.deliveries, func(l map[string]string, d *dto.Metric) {
		if l["outcome"] == "delivered" {
			update(l["webhook"], func(w *metrics.WebhookLive) { w.Delivered = d.GetCounter().GetValue() })
		}
	})
	metrics.EachMetric(m.failures, func(l map[string]string, d *dto.Metric) {
		update(l["webhook"], func(w *metrics.WebhookLive) { w.Failures += d.GetCounter().GetValue() })
	})
	metrics.EachMetric(m.latency, func(l map[string]string, d *dto.Metric) {
		update(l["webhook"], func(w *metrics.WebhookLive) {
			w.LatencySum, w.LatencyCount = d.GetHistogram().GetSampleSum(), float64(d.GetHistogram().GetSampleCount())
		})
	})
	metrics.EachMetric(m.inflight, func(l map[string]string, d *dto.Metric) {
		update(l["webhook"], func(w *metrics.WebhookLive) { w.InFlight = int(d.GetGauge().GetValue()) })
	})
	return out
}

// Live is Metrics.Live of the collectors services use by default.
func Live() map[string]metrics.WebhookLive { return defaultMetrics.Live() }
