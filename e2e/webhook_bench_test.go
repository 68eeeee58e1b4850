package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWebhookThroughput measures (VSG_BENCH=1): delivered events/s to a
// fast local receiver replaying a backlog in batches of 1,000, and at a
// steady 1,000 rows/s, commit→delivery latency percentiles and Redis
// writes per delivered event, with batch_max_wait 0 (the default) and
// 100ms.
func TestWebhookThroughput(t *testing.T) {
	needE2E(t)
	if !benchEnabled() {
		t.Skip("set VSG_BENCH=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g, "wh-bench")
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// 1. Backlog replay.
	const rows = 100000
	from := initialCursor(t, ctx, g, stream)
	tag := uniqueName("whb")
	loadStart := time.Now()
	for done := 0; done < rows; done += 1000 {
		var sb strings.Builder
		sb.WriteString("insert into customer(email) values ")
		for i := 0; i < 1000; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('%s-%d@bench')", tag, done+i)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("loaded %d rows in %v", rows, time.Since(loadStart))
	var n int
	var last time.Time
	var mu sync.Mutex
	done := make(chan struct{})
	finished := done
	fast := newWhReceiver(t, func(_ int, m *whMsg) whAnswer {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range m.events {
			if strings.HasPrefix(e.str("email"), tag+"-") {
				n++
			}
		}
		last = m.at
		if n >= rows && done != nil {
			close(done)
			done = nil
		}
		return whAnswer{process: false} // counted here; skip the receiver's bookkeeping
	})
	start := time.Now()
	replay := createWebhook(t, g, stream, map[string]any{"url": fast.url(), "secret": fast.secret, "batch_max_events": 1000, "cursor": from})
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatalf("replay: %d of %d events", n, rows)
	}
	secs := last.Sub(start).Seconds()
	t.Logf("RESULT webhook replay: %d events in %.2fs = %.0f events/s (%d requests)", rows, secs, float64(rows)/secs, len(fast.messages()))
	fast.checkSignatures(t)
	deleteWebhook(t, g, stream, replay.ID) // it would also deliver the next phases' rows

	// 2. Steady 1,000 rows/s.
	for _, wait := range []string{"0s", "100ms"} {
		steadyLatency(t, ctx, g, db, wait)
	}
}

func benchEnabled() bool { return os.Getenv("VSG_BENCH") == "1" }

// steadyLatency inserts 1,000 rows/s for 20s into a fresh stream with a
// webhook and reports commit→delivery latency and Redis writes per event.
func steadyLatency(t *testing.T, ctx context.Context, g *gateway, db *sql.DB, batchWait string) {
	stream := newCustomerStream(t, g, "wh-steady")
	r := newWhReceiver(t, nil)
	wh := createWebhook(t, g, stream, map[string]any{"url": r.url(), "secret": r.secret, "batch_max_wait": batchWait})
	defer deleteWebhook(t, g, stream, wh.ID)
	tag := uniqueName("whs")
	// Warm up: a replica has picked the webhook up and its VStream is open
	// once a first row arrives; measuring from creation would count that
	// start-up (a scan interval and a VStream open) as delivery latency.
	warm := tag + "-warmup@steady"
	if _, err := db.ExecContext(ctx, "insert into customer(email) values (?)", warm); err != nil {
		t.Fatal(err)
	}
	r.waitRows(t, ctx, []string{warm})
	r.mu.Lock()
	r.msgs = nil
	r.mu.Unlock()
	const rate, seconds, workers = 1000, 20, 128
	before := redisWrites(t)
	histBefore := scrapeHistogram(t, g)
	commits := make(map[string]time.Time, rate*seconds)
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				email := fmt.Sprintf("%s-%06d@steady", tag, i)
				if _, err := db.ExecContext(ctx, "insert into customer(email) values (?)", email); err != nil {
					t.Error(err)
					return
				}
				at := time.Now()
				mu.Lock()
				commits[email] = at
				mu.Unlock()
			}
		}()
	}
	// Paced by schedule rather than by a ticker, which drops ticks when the
	// loop falls behind: a late row is followed by the ones it delayed.
	begin := time.Now()
	for i := 0; i < rate*seconds; i++ {
		if d := time.Until(begin.Add(time.Duration(i) * time.Second / rate)); d > 0 {
			time.Sleep(d)
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(begin)
	var want []string
	for e := range commits {
		want = append(want, e)
	}
	r.waitRows(t, ctx, want)
	var lat []time.Duration
	r.mu.Lock()
	for e, c := range commits {
		lat = append(lat, max(r.arrivals[e].Sub(c), 0))
	}
	r.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	reqs := len(r.messages())
	writes, which := writesSince(t, before)
	t.Logf("RESULT steady %d rows/s (achieved %.0f/s), batch_max_wait %s: latency p50 %v p99 %v max %v; %d requests (%.1f events each); Redis writes %d (%s) = %.3f per event",
		rate, float64(len(lat))/elapsed.Seconds(), batchWait, pct(0.5).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond),
		lat[len(lat)-1].Round(time.Millisecond), reqs, float64(len(lat))/float64(reqs), writes, which, float64(writes)/float64(len(lat)))
	t.Logf("gateway side (read → 2xx, per batch): %s", histogramDelta(histBefore, scrapeHistogram(t, g)))
	// Concurrent writers: commit order is not insertion order, so only
	// exactly-once is checked here.
	seen := map[string]int{}
	for _, e := range r.processed() {
		seen[e.str("email")]++
	}
	for _, e := range want {
		if seen[e] != 1 {
			t.Errorf("row %s delivered %d times", e, seen[e])
		}
	}
}

func deleteWebhook(t *testing.T, g *gateway, stream, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if status, err := g.do(ctx, "DELETE", "/v1/streams/"+stream+"/webhooks/"+id, nil, nil); err != nil || status != 204 {
		t.Errorf("delete webhook: %d %v", status, err)
	}
}

// scrapeHistogram reads the gateway's webhook delivery latency histogram
// (gateway read → receiver 2xx, per batch): cumulative count per bucket
// bound, summed over webhooks.
func scrapeHistogram(t *testing.T, g *gateway) map[float64]float64 {
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := map[float64]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "vsg_webhook_delivery_latency_seconds_bucket{") {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		le, err := strconv.ParseFloat(line[i+4:i+4+j], 64)
		if err != nil {
			le = 1e9 // +Inf
		}
		c, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		sum[le] += c
	}
	return sum
}

// histogramDelta reports bucket-bound percentiles of what was observed
// between two scrapes.
func histogramDelta(before, after map[float64]float64) string {
	var les []float64
	for le := range after {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 {
		return "no histogram"
	}
	total := after[les[len(les)-1]] - before[les[len(les)-1]]
	at := func(p float64) string {
		for _, le := range les {
			if after[le]-before[le] >= p*total {
				return fmt.Sprintf("<= %gs", le)
			}
		}
		return "?"
	}
	return fmt.Sprintf("p50 %s, p99 %s of %.0f batches", at(0.5), at(0.99), total)
}

// redisWrites returns the calls of each write command in the test Redis's
// INFO commandstats (commands run inside Lua scripts are counted there
// too, so a fenced write counts as its one HSET).
func redisWrites(t *testing.T) map[string]int64 {
	addr := strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(c)
	head, err := rd.ReadString('\n') // a bulk string: $<length>
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO commandstats: %q %v", head, err)
	}
	size, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	buf := make([]byte, size)
	if _, err := io.ReadFull(rd, buf); err != nil {
		t.Fatal(err)
	}
	writes := map[string]bool{"set": true, "hset": true, "hdel": true, "del": true, "unlink": true, "xadd": true,
		"xtrim": true, "xdel": true, "incr": true, "incrby": true, "hsetnx": true, "setnx": true, "expire": true,
		"pexpire": true, "hincrby": true, "lpush": true, "rpush": true}
	out := map[string]int64{}
	for _, line := range strings.Split(string(buf), "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !writes[strings.ToLower(name)] {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, _ := strconv.ParseInt(calls, 10, 64)
		out[name] = v
	}
	return out
}

// writesSince sums the write calls since before, and names them.
func writesSince(t *testing.T, before map[string]int64) (int64, string) {
	var total int64
	var parts []string
	for name, v := range redisWrites(t) {
		if d := v - before[name]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s=%d", name, d))
		}
	}
	sort.Strings(parts)
	return total, strings.Join(parts, " ")
}
