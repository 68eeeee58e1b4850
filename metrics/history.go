package metrics

import (
	"context"
	"sync"
	"time"
)

// History keeps recent samples of Live, so that a dashboard opened now can
// draw the last minutes at once instead of starting its charts empty. It is
// this process's view: every replica keeps its own.
type History struct {
	every time.Duration
	max   int
	live  func() map[string]*StreamLive
	now   func() time.Time

	webhooks func() map[string]WebhookLive // guarded by mu

	mu      sync.Mutex
	samples []sample // oldest first, at most max
}

type sample struct {
	at       time.Time
	streams  map[string]sampleStream
	webhooks map[string]WebhookLive
}

type sampleStream struct {
	in, out     float64
	readers     int
	ringEntries int
}

// NewHistory keeps span worth of samples taken every every.
func NewHistory(every, span time.Duration) *History {
	n := int(span / every)
	if n < 2 {
		n = 2
	}
	return &History{every: every, max: n, live: Live, now: time.Now}
}

// Interval is the time between samples. A nil History (a gateway assembled
// without one) has no samples, and answers empty series.
func (h *History) Interval() time.Duration {
	if h == nil {
		return 0
	}
	return h.every
}

// Run samples until ctx ends.
func (h *History) Run(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	h.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Sample()
		}
	}
}

// Sample records the metrics as they are now.
func (h *History) Sample() {
	s := sample{at: h.now(), streams: map[string]sampleStream{}}
	for name, l := range h.live() {
		var out float64
		readers := 0
		for _, v := range l.EventsOut {
			out += v
		}
		for _, n := range l.Readers {
			readers += n
		}
		s.streams[name] = sampleStream{in: l.EventsIn, out: out, readers: readers, ringEntries: l.RingEntries}
	}
	h.mu.Lock()
	webhooks := h.webhooks
	h.mu.Unlock()
	if webhooks != nil {
		s.webhooks = map[string]WebhookLive{} // a copy: the source may reuse its map
		for id, w := range webhooks() {
			s.webhooks[id] = w
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == h.max {
		copy(h.samples, h.samples[1:])
		h.samples = h.samples[:h.max-1]
	}
	h.samples = append(h.samples, s)
}

// Series is one stream's recent history: rates between consecutive samples,
// stamped with the later sample's time (Unix seconds).
type Series struct {
	T           []int64   `json:"t"`
	InPerSec    []float64 `json:"events_in_per_s"`
	OutPerSec   []float64 `json:"events_out_per_s"`
	Readers     []int     `json:"readers"`
	RingEntries []int     `json:"ring_entries"`
}

// Series returns stream's history; a stream absent from a sample counts
// zero there (not started yet, or a counter not yet touched).
func (h *History) Series(stream string) Series {
	out := Series{T: []int64{}, InPerSec: []float64{}, OutPerSec: []float64{}, Readers: []int{}, RingEntries: []int{}}
	if h == nil {
		return out
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 1; i < len(h.samples); i++ {
		prev, cur := h.samples[i-1], h.samples[i]
		secs := cur.at.Sub(prev.at).Seconds()
		if secs <= 0 {
			continue
		}
		p, c := prev.streams[stream], cur.streams[stream]
		out.T = append(out.T, cur.at.Unix())
		out.InPerSec = append(out.InPerSec, rate(p.in, c.in, secs))
		out.OutPerSec = append(out.OutPerSec, rate(p.out, c.out, secs))
		out.Readers = append(out.Readers, c.readers)
		out.RingEntries = append(out.RingEntries, c.ringEntries)
	}
	return out
}

// Rates returns stream's events in and out per second over the last
// sampling interval (zero before two samples).
func (h *History) Rates(stream string) (in, out float64) {
	if h == nil {
		return 0, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.samples)
	if n < 2 {
		return 0, 0
	}
	prev, cur := h.samples[n-2], h.samples[n-1]
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	p, c := prev.streams[stream], cur.streams[stream]
	return rate(p.in, c.in, secs), rate(p.out, c.out, secs)
}

// rate of a counter between two samples; a counter that went down (a
// series deleted and made again) restarts from zero.
func rate(prev, cur, secs float64) float64 {
	if cur < prev {
		prev = 0
	}
	return (cur - prev) / secs
}
