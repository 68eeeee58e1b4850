package metrics

import "github.com/prometheus/client_golang/prometheus"

var streamPartialMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vsg_stream_partial_moves_total",
	Help: "MoveTables cutovers that moved only some of a stream's tables, by stream: the stream cannot follow them (GET /v1/streams/{name} shows `blocked`).",
}, []string{"stream"})

func init() { Registry.MustRegister(streamPartialMoves) }

// StreamPartialMove counts one cutover that moved part of stream's tables.
func StreamPartialMove(stream string) { streamPartialMoves.WithLabelValues(stream).Inc() }

// StreamPartialMovesCounter is stream's counter (tests read it).
func StreamPartialMovesCounter(stream string) prometheus.Counter {
	return streamPartialMoves.WithLabelValues(stream)
}
