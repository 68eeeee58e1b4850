package webhook

import (
	"testing"
	"time"
)

// TestMetricsLive: the numbers the console's charts sample come from the
// webhook's own collectors, by webhook id with its stream.
func TestMetricsLive(t *testing.T) {
	m := NewMetrics()
	now := time.Now()
	m.batchStarted("wh1", "s1")
	m.observeAttempt("wh1", &attempt{kind: "http_5xx", took: time.Millisecond}, attemptRetry)
	if got := m.Live()["wh1"]; got.Stream != "s1" || got.InFlight != 1 || got.Failures != 1 || got.Delivered != 0 {
		t.Fatalf("during a failing batch: %+v", got)
	}
	m.delivered("wh1", "s1", &batch{events: 2, firstRecv: now.Add(-2 * time.Second)}, now)
	m.batchEnded("wh1")
	got := m.Live()["wh1"]
	if got.InFlight != 0 || got.Delivered != 1 || got.LatencyCount != 1 || got.LatencySum < 1.9 || got.LatencySum > 2.1 {
		t.Fatalf("after delivery: %+v", got)
	}
	if _, ok := m.Live()["other"]; ok {
		t.Fatal("a webhook never delivered here is listed")
	}
}
