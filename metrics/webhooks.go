package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// WebhookLive is one webhook's counters on this replica. Only the replica
// delivering a webhook (its lease holder) has non-zero numbers for it.
type WebhookLive struct {
	Stream       string
	InFlight     int     // batches sent and not resolved yet (posting, or waiting to be retried)
	Delivered    float64 // batches the receiver confirmed
	Failures     float64 // failed attempts
	LatencySum   float64 // read → confirmed, seconds, over Delivered batches
	LatencyCount float64
}

// WebhookSeries is one webhook's recent history on this replica: rates and
// the mean delivery latency between consecutive samples (null where no
// batch was confirmed), stamped with the later sample's time.
type WebhookSeries struct {
	T              []int64    `json:"t"`
	DeliveredPerS  []float64  `json:"delivered_per_s"`
	FailuresPerS   []float64  `json:"failures_per_s"`
	LatencySeconds []*float64 `json:"latency_seconds"`
	InFlight       []int      `json:"in_flight"`
}

// EachMetric calls fn with the labels and the sample of every series of c
// (counters, gauges and histograms alike).
func EachMetric(c prometheus.Collector, fn func(labels map[string]string, m *dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		labels := make(map[string]string, len(d.GetLabel()))
		for _, lp := range d.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		fn(labels, &d)
	}
}

// SetWebhooks gives the history its source of webhook numbers (package
// webhook's Live); without one it samples none.
func (h *History) SetWebhooks(fn func() map[string]WebhookLive) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.webhooks = fn
}

// Webhooks returns the history of every webhook of stream seen in the
// last sample, by webhook id.
func (h *History) Webhooks(stream string) map[string]WebhookSeries {
	out := map[string]WebhookSeries{}
	if h == nil {
		return out
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.samples)
	if n == 0 {
		return out
	}
	for id, w := range h.samples[n-1].webhooks {
		if w.Stream != stream {
			continue
		}
		s := WebhookSeries{T: []int64{}, DeliveredPerS: []float64{}, FailuresPerS: []float64{}, LatencySeconds: []*float64{}, InFlight: []int{}}
		for i := 1; i < n; i++ {
			prev, cur := h.samples[i-1], h.samples[i]
			secs := cur.at.Sub(prev.at).Seconds()
			if secs <= 0 {
				continue
			}
			p, c := prev.webhooks[id], cur.webhooks[id]
			s.T = append(s.T, cur.at.Unix())
			s.DeliveredPerS = append(s.DeliveredPerS, rate(p.Delivered, c.Delivered, secs))
			s.FailuresPerS = append(s.FailuresPerS, rate(p.Failures, c.Failures, secs))
			s.InFlight = append(s.InFlight, c.InFlight)
			var lat *float64
			if dn := c.LatencyCount - p.LatencyCount; dn > 0 && c.LatencySum >= p.LatencySum {
				v := (c.LatencySum - p.LatencySum) / dn
				lat = &v
			}
			s.LatencySeconds = append(s.LatencySeconds, lat)
		}
		out[id] = s
	}
	return out
}

// WebhooksInFlight is how many batches of stream's webhooks this replica
// had sent and not resolved at the last sample.
func (h *History) WebhooksInFlight(stream string) int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, total := len(h.samples), 0
	if n == 0 {
		return 0
	}
	for _, w := range h.samples[n-1].webhooks {
		if w.Stream == stream {
			total += w.InFlight
		}
	}
	return total
}
