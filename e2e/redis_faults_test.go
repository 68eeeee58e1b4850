package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
)

// liveReader reads a stream continuously and records when each row came.
// A named reader acks every transaction end it reads (one row per
// transaction here), the way a client that processes as it goes does.
type liveReader struct {
	name string
	c    client
	ack  bool

	mu      sync.Mutex
	rows    []string
	evs     []ev
	at      []time.Time
	acked   string // last cursor acked
	retries int    // reads that failed and were retried (pull)
	err     error  // why it stopped, if not asked to
	// onRow, if set, is told every row (after it is recorded).
	onRow func(ev)
}

func (r *liveReader) run(ctx context.Context, retry bool) {
	for ctx.Err() == nil {
		e, err := r.c.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if retry {
				r.mu.Lock()
				r.retries++
				r.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		if e.Type != "change" {
			continue
		}
		r.mu.Lock()
		r.rows, r.evs, r.at = append(r.rows, e.str("email")), append(r.evs, e), append(r.at, time.Now())
		r.mu.Unlock()
		if r.onRow != nil {
			r.onRow(e)
		}
		if r.ack && strings.Contains(string(e.Raw), `"txn_end":true`) {
			if err := r.c.ack(ctx, e.Cursor); err == nil {
				r.mu.Lock()
				r.acked = e.Cursor
				r.mu.Unlock()
			}
		}
	}
}

func (r *liveReader) has(rows []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool, len(r.rows))
	for _, e := range r.rows {
		seen[e] = true
	}
	for _, e := range rows {
		if !seen[e] {
			return false
		}
	}
	return true
}

// gap is the longest time between two rows received between from and to:
// how long the reader was without events around a fault.
func (r *liveReader) gap(from, to time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return longestGap(r.at, from, to)
}

func longestGap(times []time.Time, from, to time.Time) time.Duration {
	var longest time.Duration
	var last time.Time
	for _, at := range times {
		if at.Before(from) || at.After(to) {
			continue
		}
		if !last.IsZero() {
			longest = max(longest, at.Sub(last))
		}
		last = at
	}
	return longest
}

func (r *liveReader) got() []ev {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ev(nil), r.evs...)
}

const writeEvery = 100 * time.Millisecond

// writeSteadily inserts a row every writeEvery until stopped, and notes
// when each insert returned (the floor for the readers' gaps).
func writeSteadily(ctx context.Context, t *testing.T, w *writer, phase func() string, times *[]time.Time, mu *sync.Mutex) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(writeEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := w.insert(ctx, phase(), 1); err != nil && ctx.Err() == nil {
					t.Errorf("insert: %v", err)
					return
				}
				mu.Lock()
				*times = append(*times, time.Now())
				mu.Unlock()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// redisFault is one way Redis fails under a running gateway.
type redisFault struct {
	name string
	args []string // redis-server's persistence settings
	// fault breaks Redis and returns when it should come back; during
	// runs while it is broken (the checks of what the API answers).
	fault func(t *testing.T, n *redistest.Node, during func())
	heal  func(t *testing.T, n *redistest.Node)
	lost  bool // the store's data is gone afterwards
}

// TestRedisFaults runs a gateway on a Redis of its own, with readers on
// every transport and a named WebSocket subscriber acking as it reads,
// and breaks Redis under it: restarted with its append-only file,
// restarted without persistence, and paused (unreachable) for 20 s.
// Connected readers must get every row exactly once throughout; acks and
// new named subscribers are refused with 503 store_unavailable while Redis
// is away, never reported done; a Redis that lost its data is reported
// and what can be restored is.
func TestRedisFaults(t *testing.T) {
	needE2E(t)
	stopStart := func(t *testing.T, n *redistest.Node, during func()) {
		n.Stop() // SIGTERM: Redis writes its append-only file out
		during()
	}
	restart := func(t *testing.T, n *redistest.Node) { n.Restart(t) }
	for _, f := range []redisFault{
		{name: "restart-aof", args: []string{"--appendonly", "yes", "--save", ""}, fault: stopStart, heal: restart},
		{name: "restart-no-persistence", args: []string{"--appendonly", "no", "--save", ""}, fault: stopStart, heal: restart, lost: true},
		{name: "unreachable-20s", args: []string{"--appendonly", "yes", "--save", ""},
			fault: func(t *testing.T, n *redistest.Node, during func()) {
				n.Pause()
				start := time.Now()
				during()
				// The fault lasts 20 s: its length is what is being tested.
				time.Sleep(time.Until(start.Add(20 * time.Second)))
			},
			heal: func(t *testing.T, n *redistest.Node) { n.Resume() }},
	} {
		t.Run(f.name, func(t *testing.T) { testRedisFault(t, f) })
	}
}

func testRedisFault(t *testing.T, f redisFault) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node := redistest.StartNode(t, redistest.NodeOptions{Args: f.args})
	tag := "rf" + strconv.FormatInt(time.Now().UnixNano()%1e7, 36)
	stream, apiStream := tag+"-file", tag+"-api"
	file := filepath.Join(t.TempDir(), "streams.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("streams:\n  - name: %s\n    keyspace: customer\n    tables: [customer]\n", stream)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "--redis", "redis://"+node.Addr()+"/0", "--streams-file", file)
	g.createStream(t, map[string]any{"name": apiStream, "keyspace": "customer", "tables": []string{"customer"}})
	w := newWriter(t, tag)

	// Readers from the current position; the named one acks as it goes.
	start := initialCursor(t, ctx, g, stream)
	named := "acker"
	if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+named+"/ack", map[string]string{"cursor": start}, &map[string]any{}); err != nil || st != 200 {
		t.Fatalf("first ack: %d %v", st, err)
	}
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	var readers []*liveReader
	var wg sync.WaitGroup
	for _, rd := range []struct {
		name, transport, sub string
	}{{"ws", "ws", ""}, {"sse", "sse", ""}, {"pull", "pull", ""}, {"ws-named", "ws", named}} {
		cursor := start
		if rd.sub != "" {
			cursor = "" // resumes from its stored cursor
		}
		c, err := transports[rd.transport](ctx, g, stream, rd.sub, cursor)
		if err != nil {
			t.Fatalf("%s: %v", rd.name, err)
		}
		defer c.close()
		r := &liveReader{name: rd.name, c: c, ack: rd.sub != ""}
		readers = append(readers, r)
		wg.Go(func() { r.run(rctx, rd.transport == "pull") })
	}
	var phaseMu sync.Mutex
	phase := "before"
	setPhase := func(p string) { phaseMu.Lock(); phase = p; phaseMu.Unlock() }
	var inserted []time.Time
	stopWriter := writeSteadily(ctx, t, w, func() string { phaseMu.Lock(); defer phaseMu.Unlock(); return phase }, &inserted, &phaseMu)
	allHave := func(what string, rows []string) {
		t.Helper()
		redistest.WaitFor(t, time.Minute, what, func() bool {
			for _, r := range readers {
				if !r.has(rows) {
					return false
				}
			}
			return true
		})
	}
	redistest.WaitFor(t, 30*time.Second, "rows before the fault", func() bool { return len(w.since(0)) >= 20 })
	allHave("every reader to have the rows before the fault", w.since(0))

	// A named subscriber that read and acked before the fault, and is
	// away during it.
	const away = "away"
	ac, err := connectPull(ctx, g, stream, "", start)
	if err != nil {
		t.Fatal(err)
	}
	awayGot, err := readUntil(ctx, ac, w.since(0)[:10])
	if err != nil {
		t.Fatal(err)
	}
	awayCursor := awayGot[len(awayGot)-1].Cursor
	if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+away+"/ack", map[string]string{"cursor": awayCursor}, &map[string]any{}); err != nil || st != 200 {
		t.Fatalf("ack of the subscriber going away: %d %v", st, err)
	}
	awaySince := len(awayGot)

	// The fault. While Redis is away: readers keep reading the rows
	// written meanwhile; an ack and new named subscribers are refused.
	faultStart := time.Now()
	setPhase("fault")
	var during []string
	f.fault(t, node, func() {
		mark := len(w.since(0))
		probeOutage(t, ctx, g, stream, start)
		redistest.WaitFor(t, 30*time.Second, "rows written during the fault", func() bool { return len(w.since(mark)) >= 20 })
		allHave("every reader to have the rows written while Redis is away", w.since(mark))
		during = w.since(mark)
	})
	f.heal(t, node)
	faultEnd := time.Now()
	setPhase("after")
	t.Logf("%s: Redis away for %v; %d rows written meanwhile reached every connected reader", f.name, faultEnd.Sub(faultStart).Round(time.Millisecond), len(during))
	redistest.WaitFor(t, 30*time.Second, "the stream to be listed again", func() bool {
		var out struct{ Streams []struct{ Name string } }
		if st, _ := g.do(ctx, "GET", "/v1/streams", nil, &out); st != 200 {
			return false
		}
		for _, d := range out.Streams {
			if d.Name == stream {
				return true
			}
		}
		return false
	})
	t.Logf("%s: the stream is listed again %v after Redis came back", f.name, time.Since(faultEnd).Round(time.Millisecond))

	// After: every reader gets everything, exactly once.
	mark := len(w.since(0))
	redistest.WaitFor(t, 30*time.Second, "rows after the fault", func() bool { return len(w.since(mark)) >= 20 })
	stopWriter()
	if err := w.insert(ctx, "sentinel", sentinels); err != nil {
		t.Fatal(err)
	}
	all := w.since(0)
	allHave("every reader to have every row", all)
	stopReaders()
	wg.Wait()
	from, to := faultStart.Add(-time.Second), faultEnd.Add(2*time.Second)
	phaseMu.Lock()
	writerGap := longestGap(inserted, from, to)
	phaseMu.Unlock()
	for _, r := range readers {
		if r.err != nil {
			t.Errorf("%s stopped: %v", r.name, r.err)
		}
		checkExactlyOnce(t, f.name+" "+r.name, r.got(), all)
		t.Logf("%s %s: %d rows, none lost, no repeats; longest time without a row from 1 s before the fault to 2 s after it %v (between two inserts: %v); %d failed pulls retried",
			f.name, r.name, len(r.rows), r.gap(from, to).Round(time.Millisecond), writerGap.Round(time.Millisecond), r.retries)
	}

	// The named subscriber's acks made during the fault are stored once
	// Redis is back (or written back from the gateway's memory if Redis
	// lost them): coming back without a cursor repeats nothing.
	acker := readers[3]
	if err := waitAcked(ctx, g, stream, named, acker.acked); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "comeback", sentinels); err != nil {
		t.Fatal(err)
	}
	c, err := connectWS(ctx, g, stream, named, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	again, err := readUntil(ctx, c, w.since(len(all)))
	if err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, f.name+" named subscriber back", again, w.since(len(all)))
	t.Logf("%s: the named subscriber came back from its stored cursor: %d rows, no repeats", f.name, len(again))

	// The one that was away resumes after its ack: from Redis, or, if
	// Redis lost it, from what the gateway wrote back.
	ac, err = connectPull(ctx, g, stream, away, "")
	if err != nil {
		t.Fatal(err)
	}
	back, err := readUntil(ctx, ac, w.since(awaySince))
	if err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, f.name+" subscriber away during the fault", back, w.since(awaySince))
	t.Logf("%s: the subscriber away during the fault resumed after its last ack: %d rows, none lost, no repeats", f.name, len(back))

	checkStoreReport(t, ctx, g, f.lost, stream, apiStream)
}

// probeOutage checks what the API answers while Redis is away: an ack and
// new named subscribers (pull, WebSocket) get 503 store_unavailable with
// Retry-After, in bounded time.
func probeOutage(t *testing.T, ctx context.Context, g *gateway, stream, cursor string) {
	t.Helper()
	check := func(what string, status int, header http.Header, body map[string]any, took time.Duration) {
		t.Helper()
		e, _ := body["error"].(map[string]any)
		if status != http.StatusServiceUnavailable || e["code"] != "store_unavailable" || header.Get("Retry-After") == "" {
			t.Errorf("%s while Redis is away: %d %v (Retry-After %q), want 503 store_unavailable with Retry-After", what, status, body, header.Get("Retry-After"))
		}
		if took > 8*time.Second {
			t.Errorf("%s while Redis is away took %v", what, took)
		}
		t.Logf("%s while Redis is away: %d %v in %v", what, status, e["code"], took.Round(time.Millisecond))
	}
	for _, c := range []struct{ what, method, path string }{
		{"ack", "POST", "/v1/streams/" + stream + "/subscribers/prober/ack"},
		{"new named pull subscriber", "GET", "/v1/streams/" + stream + "/changes?subscriber=newcomer"},
	} {
		start := time.Now()
		status, header, body := rawCall(t, ctx, g, c.method, c.path, `{"cursor":"`+cursor+`"}`)
		check(c.what, status, header, body, time.Since(start))
	}
	start := time.Now()
	u := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/streams/" + stream + "/ws?subscriber=newcomer"
	conn, resp, err := websocket.Dial(ctx, u, nil)
	if err == nil {
		conn.CloseNow()
		t.Errorf("a new named WebSocket subscriber was accepted while Redis is away")
		return
	}
	if resp == nil {
		t.Errorf("WebSocket handshake while Redis is away: %v", err)
		return
	}
	check("new named WebSocket subscriber", resp.StatusCode, resp.Header, map[string]any{"error": map[string]any{"code": "store_unavailable"}}, time.Since(start))
}

func rawCall(t *testing.T, ctx context.Context, g *gateway, method, path, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, g.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// checkStoreReport checks what the gateway says about the store after the
// fault: nothing when Redis kept its data; a loss (log, metric, restored
// streams file, gone API stream, resync for a subscriber without a
// cursor) when it did not, and /readyz back to ready either way.
func checkStoreReport(t *testing.T, ctx context.Context, g *gateway, lost bool, stream, apiStream string) {
	t.Helper()
	redistest.WaitFor(t, 30*time.Second, "/readyz to be ready", func() bool {
		resp, err := http.Get(g.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for _, want := range []string{"the store does not answer", "the store answers again"} {
		if !strings.Contains(g.log.String(), want) {
			t.Errorf("the gateway's log does not say %q", want)
		}
	}
	reported := strings.Contains(g.log.String(), "THE STORE LOST DATA")
	metric := metricValue(t, g, "vsg_store_data_lost_total")
	apiStatus, _ := g.do(ctx, "GET", "/v1/streams/"+apiStream, nil, &map[string]any{})
	if !lost {
		if reported || metric != 0 || apiStatus != 200 {
			t.Errorf("Redis kept its data, but: loss reported %v, vsg_store_data_lost_total %v, API stream %d", reported, metric, apiStatus)
		}
		return
	}
	for _, line := range strings.Split(g.log.String(), "\n") {
		if strings.Contains(line, "STORE LOST DATA") || strings.Contains(line, "restored") || strings.Contains(line, "written back") ||
			strings.Contains(line, "not in --streams-file") || strings.Contains(line, "store_lost") {
			t.Logf("gateway: %.400s", line)
		}
	}
	named := false
	for _, line := range strings.Split(g.log.String(), "\n") {
		named = named || (strings.Contains(line, "not in --streams-file") && strings.Contains(line, apiStream))
	}
	if !reported || metric != 1 || !named {
		t.Errorf("Redis lost its data: loss reported %v, vsg_store_data_lost_total %v, lost stream named %v", reported, metric, named)
	}
	if apiStatus != 404 {
		t.Errorf("the API stream after the loss: %d, want 404", apiStatus)
	}
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream, nil, &map[string]any{}); err != nil || st != 200 {
		t.Errorf("the streams-file stream after the loss: %d %v", st, err)
	}
	c, err := connectPull(ctx, g, stream, "latecomer", "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.next(ctx)
	if err != nil || e.Type != "resync" || !strings.Contains(string(e.Raw), `"reason":"store_lost"`) {
		t.Errorf("first event of a subscriber without a cursor after the loss: %s, %v; want a resync with reason store_lost", e.Raw, err)
	}
}

// metricValue reads an unlabelled metric from /metrics.
func metricValue(t *testing.T, g *gateway, name string) float64 {
	t.Helper()
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}
