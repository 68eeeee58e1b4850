package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchTxn is a WebSocket message with batch=txn: a transaction of 1000
// inserted rows as the gateway writes them.
func benchTxn() []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"change","op":"insert","keyspace":"customer","shard":"-80","table":"customer","key":{"customer_id":%d},"before":null,"after":{"customer_id":%d,"email":"bench-%d@example.com"},"commit_ts":"2026-12-02T15:01:02Z","cursor":"1aQoKCGN1c3RvbWVyEgMtODAaH01hcmlhREIvMC0xMjM0NTY3ODktNjF8dZJhQ2kQ"`, i, i, i)
		if i == 999 {
			b.WriteString(`,"txn_end":true`)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// BenchmarkDecodeTxn decodes a transaction message into its events, as the
// WebSocket reader does; BenchmarkDecodeTxnStd with encoding/json alone.
func BenchmarkDecodeTxn(b *testing.B) {
	var d decoder
	benchDecode(b, d.message)
}

func BenchmarkDecodeTxnStd(b *testing.B) {
	benchDecode(b, func(msg []byte) ([]wireEvent, error) {
		var evs []wireEvent
		return evs, json.Unmarshal(msg, &evs)
	})
}

func benchDecode(b *testing.B, decode func([]byte) ([]wireEvent, error)) {
	msg := benchTxn()
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		evs, err := decode(msg)
		if err != nil {
			b.Fatal(err)
		}
		var a assembler
		for i := range evs {
			if _, err := a.add(&evs[i], evs[i].TxnEnd, evs[i].Cursor); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/event")
}
