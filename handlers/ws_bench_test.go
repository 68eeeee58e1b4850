package handlers

import (
	"fmt"
	"net"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// discardConn is a network that takes every write at once.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// benchTxn is a transaction of n customer rows the size of a typical one.
func benchTxn(n int) *hub.Delivery {
	events := make([]event.Event, n)
	for i := range events {
		events[i] = event.Event{Type: event.TypeChange, Op: event.OpInsert, Keyspace: "customer", Table: "customer",
			JSON: fmt.Appendf(nil, `{"type":"change","op":"insert","keyspace":"customer","shard":"-80","table":"customer",`+
				`"key":{"customer_id":%d},"before":null,"after":{"customer_id":%d,"email":"jane.doe@example.com","name":"Jane Doe",`+
				`"status":"active","balance":"1520.75","created_at":"2024-06-01T07:34:56.123456Z","updated_at":"2024-06-01T12:34:56Z"},`+
				`"commit_ts":"2026-12-02T15:01:02Z"`, i, i)}
	}
	return &hub.Delivery{Txn: &source.Txn{Events: events}, Cursor: "CgZjdXN0b21lchIDLTgwGjJNeVNRTDU2LzNlMTFmYTQ3LTcxY2EtMTFlMS05ZTMzLWM4MGFhOTQyOTU2MjoxLTEyMzQ1"}
}

// BenchmarkWriteTxn is the WebSocket writer's cost per event: encoding
// into the reused buffer, marking the transaction's end and framing, one
// message per event or (batch) one per transaction.
func BenchmarkWriteTxn(b *testing.B) {
	for _, batch := range []bool{false, true} {
		for _, n := range []int{1, 10} {
			b.Run(fmt.Sprintf("batch=%t/events=%d", batch, n), func(b *testing.B) {
				d := benchTxn(n)
				conn := wsconn.New(discardConn{})
				var buf []byte
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if buf, err = writeTxn(conn, d, batch, buf); err != nil {
						b.Fatal(err)
					}
					conn.Flush()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
			})
		}
	}
}
