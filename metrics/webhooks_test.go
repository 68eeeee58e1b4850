package metrics

import (
	"testing"
	"time"
)

// TestHistoryWebhooks: per-webhook rates, the mean latency of the batches
// confirmed in each interval (null where none was), and the batches in
// flight, for the webhooks of one stream only.
func TestHistoryWebhooks(t *testing.T) {
	at := time.Unix(1000, 0)
	whs := map[string]WebhookLive{}
	h := NewHistory(5*time.Second, time.Minute)
	h.live = func() map[string]*StreamLive { return nil }
	h.now = func() time.Time { return at }
	h.SetWebhooks(func() map[string]WebhookLive { return whs })
	step := func(w WebhookLive) {
		whs["wh1"] = w
		whs["other"] = WebhookLive{Stream: "s2", InFlight: 3}
		h.Sample()
		at = at.Add(5 * time.Second)
	}
	step(WebhookLive{Stream: "s"})
	step(WebhookLive{Stream: "s", InFlight: 1, Failures: 10})
	step(WebhookLive{Stream: "s", Failures: 10, Delivered: 2, LatencySum: 3, LatencyCount: 2})
	got := h.Webhooks("s")
	if len(got) != 1 {
		t.Fatalf("webhooks of s: %+v", got)
	}
	s := got["wh1"]
	if len(s.T) != 2 || s.FailuresPerS[0] != 2 || s.FailuresPerS[1] != 0 || s.DeliveredPerS[1] != 0.4 || s.InFlight[0] != 1 || s.InFlight[1] != 0 {
		t.Fatalf("series %+v", s)
	}
	if s.LatencySeconds[0] != nil || s.LatencySeconds[1] == nil || *s.LatencySeconds[1] != 1.5 {
		t.Fatalf("latency %v", s.LatencySeconds)
	}
	if n := h.WebhooksInFlight("s2"); n != 3 {
		t.Fatalf("in flight on s2: %d", n)
	}
	var none *History
	if len(none.Webhooks("s")) != 0 || none.WebhooksInFlight("s") != 0 {
		t.Fatal("a nil history has webhooks")
	}
}
