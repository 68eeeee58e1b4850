package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// StreamLive is what this process's metrics hold for one stream right now:
// the counters and gauges the dashboard's stats endpoint shows. It reads the
// collectors themselves (no exposition text is produced or parsed), so it
// is exactly what /metrics would say at the same moment.
type StreamLive struct {
	EventsIn    float64            // events read from vtgate, every VStream of the stream
	EventsOut   map[string]float64 // events sent, by transport
	Readers     map[string]int     // connected clients, by transport
	Tail        bool               // a tail runs
	RingEntries int
	RingBytes   int
}

// Live returns every stream the metrics know of, by name.
func Live() map[string]*StreamLive {
	out := map[string]*StreamLive{}
	get := func(stream string) *StreamLive {
		s := out[stream]
		if s == nil {
			s = &StreamLive{EventsOut: map[string]float64{}, Readers: map[string]int{}}
			out[stream] = s
		}
		return s
	}
	each(eventsIn, func(l map[string]string, v float64) { get(l["stream"]).EventsIn += v })
	each(eventsOut, func(l map[string]string, v float64) { get(l["stream"]).EventsOut[l["transport"]] += v })
	each(streamClients, func(l map[string]string, v float64) {
		if l["stream"] != "" {
			get(l["stream"]).Readers[l["transport"]] += int(v)
		}
	})
	each(tails, func(l map[string]string, v float64) { get(l["stream"]).Tail = v > 0 })
	each(ringEntries, func(l map[string]string, v float64) { get(l["stream"]).RingEntries = int(v) })
	each(ringBytes, func(l map[string]string, v float64) { get(l["stream"]).RingBytes = int(v) })
	return out
}

// each calls fn with the labels and value of every counter and gauge
// series of c.
func each(c prometheus.Collector, fn func(labels map[string]string, v float64)) {
	EachMetric(c, func(labels map[string]string, d *dto.Metric) {
		switch {
		case d.Counter != nil:
			fn(labels, d.GetCounter().GetValue())
		case d.Gauge != nil:
			fn(labels, d.GetGauge().GetValue())
		}
	})
}
