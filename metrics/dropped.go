package metrics

import "github.com/prometheus/client_golang/prometheus"

var streamTablesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vsg_stream_tables_dropped_total",
	Help: "Readers that saw their stream's tables dropped (or renamed away) from its keyspace, by stream: a gap reported under the stream's on_gap (a MoveTables complete the gateway did not follow, without --vtctld).",
}, []string{"stream"})

func init() { Registry.MustRegister(streamTablesDropped) }

// StreamTablesDropped counts one reader of stream seeing its tables dropped.
func StreamTablesDropped(stream string) { streamTablesDropped.WithLabelValues(stream).Inc() }
