package main

import (
	"fmt"
	"log/slog"
	"testing"
)

func testReader() *reader {
	e := &env{marker: rowMarker("r1"), lat: &hist{}, ready: make(chan int, 1), log: slog.Default()}
	return &reader{env: e, t: newTally()}
}

func event(seq int64, tail string) []byte {
	return fmt.Appendf(nil, `{"type":"change","op":"insert","after":{"email":"%s"},"cursor":"C%d"%s}`, emailFor("r1", seq, 1), seq, tail)
}

func TestGatewayCursorOnlyAtTransactionEnds(t *testing.T) {
	r := testReader()
	r.gatewayMessage(event(0, ""), 10) // mid-transaction: not a resume point
	if len(r.cursor) != 0 || r.t.readyAt != 0 {
		t.Fatalf("cursor %q taken mid-transaction", r.cursor)
	}
	r.gatewayMessage(event(1, `,"txn_end":true`), 20)
	if string(r.cursor) != "C1" || r.t.readyAt != 20 {
		t.Fatalf("cursor %q ready %d", r.cursor, r.t.readyAt)
	}
	r.gatewayMessage([]byte(`{"type":"heartbeat","cursor":"H"}`), 30)
	r.gatewayMessage([]byte(`{"type":"disconnect","code":4008,"cursor":"D"}`), 40)
	if string(r.cursor) != "D" || r.t.rows != 2 || r.msgs.Load() != 4 || r.t.readyAt != 20 {
		t.Fatalf("cursor %q rows %d msgs %d", r.cursor, r.t.rows, r.msgs.Load())
	}
	// batch=txn: one array per transaction.
	r.gatewayMessage(fmt.Appendf(nil, `[%s,%s]`, event(2, ""), event(3, `,"txn_end":true`)), 50)
	if string(r.cursor) != "C3" || r.t.rows != 4 {
		t.Fatalf("batch: cursor %q rows %d", r.cursor, r.t.rows)
	}
}

func TestCentrifugoPushAndRecovery(t *testing.T) {
	r := testReader()
	connected := false
	if err := r.cfLine(nil, []byte(`{"id":1,"connect":{"client":"x","ping":25,"pong":true}}`), 1, &connected); err != nil || connected {
		t.Fatalf("connect reply: %v %v", err, connected)
	}
	if err := r.cfLine(nil, []byte(`{"id":2,"subscribe":{"recoverable":true,"epoch":"E","offset":7,"positioned":true}}`), 2, &connected); err != nil || !connected {
		t.Fatalf("subscribe reply: %v", err)
	}
	if r.cfEpoch != "E" || r.cfOffset != 7 || r.t.readyAt != 2 {
		t.Fatalf("epoch %q offset %d", r.cfEpoch, r.cfOffset)
	}
	push := fmt.Appendf(nil, `{"push":{"channel":"load","pub":{"data":%s,"offset":8}}}`, event(0, `,"txn_end":true`))
	if err := r.cfLine(nil, push, 3, &connected); err != nil || r.cfOffset != 8 || r.t.rows != 1 {
		t.Fatalf("push: %v offset %d rows %d", err, r.cfOffset, r.t.rows)
	}
	// A reconnect recovers the missed publications inside the reply; one
	// that could not be recovered is counted.
	rec := fmt.Appendf(nil, `{"id":2,"subscribe":{"epoch":"E","offset":10,"recovered":true,"was_recovering":true,"publications":[{"data":%s,"offset":9},{"data":%s,"offset":10}]}}`,
		event(1, ""), event(2, ""))
	if err := r.cfLine(nil, rec, 4, &connected); err != nil || r.cfOffset != 10 || r.t.rows != 3 || r.recoveryFailed.Load() != 0 {
		t.Fatalf("recovery: %v offset %d rows %d", err, r.cfOffset, r.t.rows)
	}
	r.cfLine(nil, []byte(`{"id":2,"subscribe":{"epoch":"F","offset":20,"was_recovering":true}}`), 5, &connected)
	if r.recoveryFailed.Load() != 1 || r.cfEpoch != "F" {
		t.Fatal("failed recovery not counted")
	}
	if err := r.cfLine(nil, []byte(`{"push":{"channel":"load","disconnect":{"code":3001}}}`), 6, &connected); err == nil {
		t.Fatal("disconnect push not an error")
	}
	if err := r.cfLine(nil, []byte(`{"id":2,"error":{"code":103,"message":"permission denied"}}`), 7, &connected); err == nil {
		t.Fatal("error reply accepted")
	}
}
