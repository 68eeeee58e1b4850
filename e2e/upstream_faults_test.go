package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// faultReaders are the readers of a fault test: every transport, named and
// anonymous, all from one starting cursor, plus a webhook.
type faultReaders struct {
	readers []*bgReader
	named   map[*bgReader]string // reader → subscriber, for those that ack
	wh      *whReceiver
}

func startFaultReaders(t *testing.T, ctx context.Context, g *gateway, stream, start string) *faultReaders {
	t.Helper()
	f := &faultReaders{named: map[*bgReader]string{}}
	ackStart := func(sub string) {
		var out map[string]any
		if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+sub+"/ack", map[string]string{"cursor": start}, &out); err != nil || st != 200 {
			t.Fatalf("ack %s: %d %v %v", sub, st, out, err)
		}
	}
	add := func(r *bgReader) {
		f.readers = append(f.readers, r)
		go r.run(ctx)
	}
	for i := 1; i <= 2; i++ {
		c, err := connectWS(ctx, g, stream, "", start)
		if err != nil {
			t.Fatal(err)
		}
		add(&bgReader{name: fmt.Sprintf("ws-%d", i), next: c.next})
	}
	ackStart("fws")
	ws, err := connectWS(ctx, g, stream, "fws", "")
	if err != nil {
		t.Fatal(err)
	}
	r := &bgReader{name: "ws-named", next: ws.next, ack: ws.ack}
	f.named[r] = "fws"
	add(r)

	sse, err := connectSSE(ctx, g, stream, "", start)
	if err != nil {
		t.Fatal(err)
	}
	add(&bgReader{name: "sse", next: sse.next})
	ackStart("fsse")
	sseNamed, err := connectSSE(ctx, g, stream, "fsse", "")
	if err != nil {
		t.Fatal(err)
	}
	add(&bgReader{name: "sse-named", next: sseNamed.next})

	pull := &pullReader{g: g, stream: stream, cursor: start}
	add(&bgReader{name: "pull", next: pull.next})
	ackStart("fpull")
	pullNamed := &pullReader{g: g, stream: stream, subscriber: "fpull"}
	r = &bgReader{name: "pull-named", next: pullNamed.next, ack: pullNamed.ack}
	f.named[r] = "fpull"
	add(r)

	f.wh = newWhReceiver(t, nil)
	createWebhook(t, g, stream, map[string]any{"url": f.wh.url(), "secret": f.wh.secret, "cursor": start, "max_attempts": 1000, "timeout": "5s"})
	t.Cleanup(func() {
		ws.close()
		sse.close()
		sseNamed.close()
	})
	return f
}

// all reports whether every reader, and the webhook, has every row of want
// (or a reader stopped: the checks say which).
func (f *faultReaders) all(want []string) bool {
	for _, r := range f.readers {
		if !r.has(want) {
			return false
		}
	}
	arrived := f.whArrivals()
	for _, e := range want {
		if _, ok := arrived[e]; !ok {
			return false
		}
	}
	return true
}

func (f *faultReaders) whArrivals() map[string]time.Time {
	f.wh.mu.Lock()
	defer f.wh.mu.Unlock()
	m := make(map[string]time.Time, len(f.wh.arrivals))
	for k, v := range f.wh.arrivals {
		m[k] = v
	}
	return m
}

// waitAll waits until every reader has want.
func (f *faultReaders) waitAll(t *testing.T, ctx context.Context, what string, want []string) {
	t.Helper()
	if !waitUntil(ctx, 3*time.Minute, func() bool { return f.all(want) }) {
		for _, r := range f.readers {
			got, _, err := r.snapshot()
			t.Logf("%s: %d rows, err %v", r.name, len(got), err)
		}
		t.Fatalf("%s: not every reader got the %d rows within 3 minutes", what, len(want))
	}
}

// check asserts that no reader was dropped and that each got want exactly
// once, in order per shard, and that named readers' acks were stored.
func (f *faultReaders) check(t *testing.T, ctx context.Context, g *gateway, stream string, want []string) {
	t.Helper()
	for _, r := range f.readers {
		got, _, err := r.snapshot()
		if err != nil {
			t.Errorf("%s was dropped: %v", r.name, err)
		}
		checkExactlyOnce(t, r.name, got, want)
		if sub, ok := f.named[r]; ok {
			r.mu.Lock()
			acked := r.acked
			r.mu.Unlock()
			if err := waitAcked(ctx, g, stream, sub, acked); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkExactlyOnce(t, "webhook", f.wh.processed(), want)
	f.wh.checkSignatures(t)
	ids := map[string]int{}
	for _, m := range f.wh.messages() {
		ids[m.id]++
	}
	again := 0
	for _, n := range ids {
		if n > 1 {
			again++
		}
	}
	t.Logf("webhook: %d requests, %d batches, %d sent more than once (same webhook-id, de-duplicated by the receiver)", len(f.wh.messages()), len(ids), again)
}

// report logs, per reader, the longest time without a row and the longest
// wait of a row written during [from, to).
func (f *faultReaders) report(t *testing.T, fault string, w *steadyWriter, from, to time.Time) {
	t.Helper()
	inserted := w.insertedAt()
	writerGap, _ := rowGaps(inserted, nil, from, to)
	var parts []string
	for _, r := range f.readers {
		gap, lat := rowGaps(r.arrivals(), inserted, from, to)
		parts = append(parts, fmt.Sprintf("%s %v/%v", r.name, gap.Round(100*time.Millisecond), lat.Round(100*time.Millisecond)))
	}
	gap, lat := rowGaps(f.whArrivals(), inserted, from, to)
	parts = append(parts, fmt.Sprintf("webhook %v/%v", gap.Round(100*time.Millisecond), lat.Round(100*time.Millisecond)))
	t.Logf("%s: writer without a successful insert for %v; readers' longest time without a row / longest row wait: %s",
		fault, writerGap.Round(100*time.Millisecond), strings.Join(parts, ", "))
}

// maxLatency is the longest any reader (or the webhook) waited for a row
// inserted in [from, to).
func (f *faultReaders) maxLatency(w *steadyWriter, from, to time.Time) time.Duration {
	inserted := w.insertedAt()
	_, worst := rowGaps(f.whArrivals(), inserted, from, to)
	for _, r := range f.readers {
		_, lat := rowGaps(r.arrivals(), inserted, from, to)
		worst = max(worst, lat)
	}
	return worst
}

// rowsAfter returns the successfully inserted rows answered after t.
func rowsAfter(w *steadyWriter, t time.Time) []string {
	var out []string
	for email, at := range w.insertedAt() {
		if at.After(t) {
			out = append(out, email)
		}
	}
	return out
}

// waitRowsAfter waits until at least n rows were written after since and
// every reader has them.
func (f *faultReaders) waitRowsAfter(t *testing.T, ctx context.Context, w *steadyWriter, since time.Time, n int, what string) {
	t.Helper()
	if !waitUntil(ctx, 2*time.Minute, func() bool { return len(rowsAfter(w, since)) >= n }) {
		t.Fatalf("%s: fewer than %d rows written within 2 minutes", what, n)
	}
	f.waitAll(t, ctx, what, rowsAfter(w, since))
}

var outageLogged = regexp.MustCompile(`msg="upstream available again; stream resumed" stream=(\S+) .*unavailable_for=(\S+)`)

// TestVtgateOutages: readers on every transport (WebSocket, SSE, pull;
// named and anonymous) and a webhook read a stream written at 20 rows/s
// while vtgate restarts, and then while vtgate is down for 30 s. No reader
// is dropped; every row written arrives exactly once, in order; the
// gateway logs and counts the outage.
func TestVtgateOutages(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// vtgate runs, whatever an interrupted run left.
	if err := cluster.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.StartVtgate(context.Background()); err != nil {
			t.Errorf("start vtgate after the test: %v", err)
		}
	})
	run := startFaultRun(t, ctx, "vtg")
	g, stream, f, w := run.g, run.stream, run.f, run.w

	// Fault 1: vtgate restarts (SIGTERM, start, serving again).
	restartAt := time.Now()
	if err := cluster.RestartVtgate(ctx); err != nil {
		t.Fatal(err)
	}
	restartedAt := time.Now()
	t.Logf("vtgate restarted in %v", restartedAt.Sub(restartAt).Round(time.Millisecond))
	f.waitRowsAfter(t, ctx, w, restartedAt, 100, "after the restart")
	afterRestart := time.Now()

	// Fault 2: vtgate down for 30 s. vtgate drains for up to 10 s after
	// SIGTERM (its streams stay open, quiet); the 30 s count from its exit.
	downAt := time.Now()
	if err := cluster.StopVtgate(ctx); err != nil {
		t.Fatal(err)
	}
	goneAt := time.Now()
	t.Logf("vtgate stopped in %v", goneAt.Sub(downAt).Round(time.Millisecond))
	if !waitUntil(ctx, 25*time.Second, func() bool {
		return metricSum(t, g, "vsg_upstream_unavailable", `stream="`+stream+`"`) >= 1
	}) {
		t.Errorf("vsg_upstream_unavailable{stream=%q} never rose while vtgate was down", stream)
	}
	select {
	case <-time.After(time.Until(goneAt.Add(30 * time.Second))): // the outage's length is the scenario
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if s := metricSum(t, g, "vsg_upstream_unavailable_seconds", `stream="`+stream+`"`); s < 29 {
		t.Errorf("after 30 s without vtgate, vsg_upstream_unavailable_seconds{stream=%q} = %v", stream, s)
	}
	if !strings.Contains(g.log.String(), `msg="upstream still unavailable; retrying" stream=`+stream) {
		t.Errorf("no reminder that the upstream is still unavailable after 30 s")
	}
	if err := cluster.StartVtgate(ctx); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	t.Logf("vtgate gone for %v", upAt.Sub(goneAt).Round(time.Millisecond))
	f.waitRowsAfter(t, ctx, w, upAt, 100, "after the outage")

	run.finish(t, ctx, "while vtgate was away")
	f.report(t, "vtgate restart", w, restartAt, afterRestart)
	f.report(t, "vtgate down 30 s", w, downAt, time.Now())
	// Rows written once vtgate serves again reach every reader promptly:
	// the gateway reconnects within its retry wait, not gRPC's minutes.
	if lat := f.maxLatency(w, upAt, time.Now()); lat > 15*time.Second {
		t.Errorf("rows written after vtgate came back waited up to %v", lat)
	}
	run.noneClosedUpstreamFailed(t)
	// Logged and counted, with the outage's duration.
	var longest time.Duration
	for _, m := range outageLogged.FindAllStringSubmatch(g.log.String(), -1) {
		if m[1] == stream {
			d, _ := time.ParseDuration(m[2])
			longest = max(longest, d)
		}
	}
	if longest < 29*time.Second {
		t.Errorf("longest logged outage of stream %s: %v, want about 30 s", stream, longest)
	}
	n := metricSum(t, g, "vsg_upstream_interruptions_total", `stream="`+stream+`"`)
	secs := metricSum(t, g, "vsg_upstream_outage_seconds_sum", `stream="`+stream+`"`)
	if n < 2 || secs < 25 {
		t.Errorf("vsg_upstream_interruptions_total %v, vsg_upstream_outage_seconds_sum %v; want both outages counted", n, secs)
	}
	if v := metricSum(t, g, "vsg_upstream_unavailable", `stream="`+stream+`"`); v != 0 {
		t.Errorf("vsg_upstream_unavailable %v after vtgate came back", v)
	}
	t.Logf("gateway: %v interruptions of the stream's VStreams, %.1f s without vtgate in all, longest logged outage %v", n, secs, longest)
	for _, line := range strings.Split(g.log.String(), "\n") {
		if strings.Contains(line, "upstream") && strings.Contains(line, "level=WARN") || strings.Contains(line, "upstream available again") {
			t.Logf("gateway: %s", line)
		}
	}
}
