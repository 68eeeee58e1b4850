package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestMetricsExposed(t *testing.T) {
	EventsIn("orders", 3)
	o := Outbound("orders", TransportWS)
	o.Sent(2, 1, 1.5)
	done := ClientConnected("orders", TransportSSE)
	CursorWrite("orders")
	CursorRebuild(RebuildBridged)
	AuthFailure("expired")
	Refused("rate_limited")
	HTTPRequest("/v1/streams", "GET", 200, 0.01)
	UpstreamLost("orders", time.Now().Add(-2*time.Second))()
	UpstreamLost("orders", time.Now().Add(-3*time.Second))

	if body := scrape(); !strings.Contains(body, `vsg_clients{transport="sse"} 1`) {
		t.Errorf("sse client not counted")
	}
	done()
	body := scrape()
	for _, want := range []string{
		`vsg_clients{transport="sse"} 0`,
		`vsg_stream_clients{stream="orders",transport="sse"} 0`,
		`vsg_cursor_rebuilds_total{outcome="bridged"} 1`,
		`vsg_events_in_total{stream="orders"} 3`,
		`vsg_events_out_total{stream="orders",transport="ws"} 2`,
		`vsg_events_filtered_total{stream="orders",transport="ws"} 1`,
		`vsg_lag_seconds{stream="orders"} 1.5`,
		`vsg_cursor_writes_total{stream="orders"} 1`,
		`vsg_cursor_rebuilds_total{outcome="resync"} 0`,
		`vsg_auth_failures_total{reason="expired"} 1`,
		`vsg_http_requests_total{code="200",method="GET",route="/v1/streams"} 1`,
		`vsg_upstream_interruptions_total{stream="orders"} 2`,
		`vsg_upstream_outage_seconds_count{stream="orders"} 1`,
		`vsg_upstream_unavailable{stream="orders"} 1`,
		`vsg_upstream_unavailable_seconds{stream="orders"} 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "vsg_") {
			t.Errorf("lint %s: %s", p.Metric, p.Text)
		}
	}
	if err != nil {
		t.Error(err)
	}
}

func scrape() string {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}
