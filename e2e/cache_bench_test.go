package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// needCacheBench skips the heavy cache measurement unless VSG_BENCH_CDN=1
// (make bench-cdn).
func needCacheBench(t *testing.T) {
	t.Helper()
	needE2E(t)
	if os.Getenv("VSG_BENCH_CDN") != "1" {
		t.Skip("the pull cache measurement runs with VSG_BENCH_CDN=1 (make bench-cdn)")
	}
}

// benchEnv is an integer from the environment, or def.
func benchEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// loadReport is what the measurement reads of vsg-load's JSON report.
type loadReport struct {
	Lost          int64   `json:"lost"`
	Dups          int64   `json:"dups"`
	ReadersFailed int     `json:"readers_failed"`
	ReadersBehind int     `json:"readers_behind"`
	Window        float64 `json:"window_s"`
	RowsWritten   int64   `json:"rows_written"`
	P50           float64 `json:"latency_p50_ms"`
	P99           float64 `json:"latency_p99_ms"`
	PullRequests  int64   `json:"pull_requests"`
	GatewayPulls  float64 `json:"gateway_pull_requests"`
	Server        struct {
		CPU float64 `json:"cpu_s"`
		RSS float64 `json:"rss_peak_mib"`
	} `json:"server"`
}

// Long-pollers in step at the live end at 200 rows/s, side by side in one
// run: through Varnish, straight to the gateway, and as many WebSockets
// (VSG_BENCH_CDN_READERS, default 2,000; VSG_BENCH_CDN_SECONDS of writing,
// default 20). Reported per side: requests reaching the gateway per
// second, the gateway's CPU seconds, p99 commit→reader, rows lost and
// duplicated (vsg-load checks every row at every reader). The gateway runs
// with --pull-cache --pull-live-linger 500ms.
func TestPullCacheLoad(t *testing.T) {
	needCacheBench(t)
	k, secs := benchEnv("VSG_BENCH_CDN_READERS", 2000), benchEnv("VSG_BENCH_CDN_SECONDS", 20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "vsg-load")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/vsg-load").CombinedOutput(); err != nil {
		t.Fatalf("build vsg-load: %v\n%s", err, out)
	}
	g := startGateway(t, append(withDataDir(t), "--pull-cache", "--pull-live-linger", "500ms", "--max-conns-per-token", "0",
		"--log-level", "info")...)
	proxy := startVarnish(t, g.url, k/2)
	stream := "cdnload-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	offset := benchEnv("VSG_E2E_PORT_OFFSET", 0)
	run := func(name string, readers ...string) loadReport {
		t.Helper()
		out := filepath.Join(t.TempDir(), name+".json")
		args := append([]string{"--url", g.url, "--stream", stream, "--rate", "200", "--duration", strconv.Itoa(secs) + "s",
			"--server-pid", strconv.Itoa(g.cmd.Process.Pid), "--mysql", cluster.MySQLAddr(),
			"--vtgate-vars", fmt.Sprintf("http://localhost:%d/debug/vars", 15001+offset), "--vtctld", cluster.VtctldAddr(),
			"--vtctldclient", filepath.Join(cluster.BinDir(), "vtctldclient"), "--connect-concurrency", "256",
			"--json", out, "--log-level", "warn"}, readers...)
		cmd := exec.CommandContext(ctx, bin, args...)
		text, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", name, text)
		if err != nil {
			t.Errorf("%s: vsg-load: %v", name, err)
		}
		var r loadReport
		b, err := os.ReadFile(out)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil {
			t.Fatalf("%s: report: %v", name, err)
		}
		if r.Lost != 0 || r.Dups != 0 || r.ReadersFailed != 0 {
			t.Errorf("%s: %d rows lost, %d duplicated, %d readers failed", name, r.Lost, r.Dups, r.ReadersFailed)
		}
		return r
	}
	n := strconv.Itoa(k)
	pull := []string{"--pull", n, "--pull-in-step", "--pull-wait", "20s"}
	type side struct {
		name   string
		r      loadReport
		proxyS float64 // Varnish's CPU seconds
	}
	var sides []side
	for _, s := range []struct {
		name, key string
		args      []string
	}{
		{"pull via Varnish", "proxy", append(slices.Clone(pull), "--pull-url", proxy.url)},
		{"pull direct", "direct", pull},
		{"WebSocket", "ws", []string{"--ws", n}},
	} {
		if only := os.Getenv("VSG_BENCH_CDN_SIDES"); only != "" && !strings.Contains(only, s.key) {
			continue
		}
		v := proxy.cpuTicks()
		r := run(s.key, s.args...)
		sides = append(sides, side{s.name, r, float64(proxy.cpuTicks()-v) / 100})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d readers, 200 rows/s for %d s:\n", k, secs)
	fmt.Fprintf(&b, "  %-17s %12s %12s %10s %10s %9s %9s %8s\n", "", "client req/s", "gateway r/s", "gw CPU s", "proxy CPU", "p50 ms", "p99 ms", "lost/dup")
	for _, s := range sides {
		reqs, gw := "-", "-"
		if s.r.PullRequests > 0 {
			reqs = fmt.Sprintf("%.0f", float64(s.r.PullRequests)/s.r.Window)
			gw = fmt.Sprintf("%.1f", s.r.GatewayPulls/s.r.Window)
		}
		fmt.Fprintf(&b, "  %-17s %12s %12s %10.2f %10.2f %9.0f %9.0f %d/%d\n", s.name, reqs, gw, s.r.Server.CPU, s.proxyS, s.r.P50, s.r.P99, s.r.Lost, s.r.Dups)
	}
	t.Log(b.String())
	if len(sides) != 3 {
		return // a partial run: no comparison
	}
	proxySide, ws := sides[0].r, sides[2].r
	if rate := proxySide.GatewayPulls / proxySide.Window; rate > 2 {
		t.Errorf("through the cache %.1f requests a second reached the gateway, target ≤ 2", rate)
	}
	if proxySide.Server.CPU > ws.Server.CPU {
		t.Errorf("through the cache the gateway used %.2f s of CPU, %d WebSockets %.2f s", proxySide.Server.CPU, k, ws.Server.CPU)
	}
	if proxySide.P99 > 1000 {
		t.Errorf("through the cache p99 %.0f ms, target ≤ 1 s", proxySide.P99)
	}
}

// Readers (VSG_BENCH_CDN_SNAPSHOT_READERS, default 500) starting at once
// from the beginning of a snapshot of VSG_BENCH_CDN_SNAPSHOT_ROWS rows
// (default 100,000; a table of its own in the unsharded commerce keyspace,
// dropped after) through Varnish: each must get every row once, and each
// page must leave the gateway once.
func TestPullCacheSnapshot(t *testing.T) {
	needCacheBench(t)
	readers, rows := benchEnv("VSG_BENCH_CDN_SNAPSHOT_READERS", 500), benchEnv("VSG_BENCH_CDN_SNAPSHOT_ROWS", 100000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	db, err := cluster.OpenDB("commerce")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const table = "cdn_snapshot"
	for _, q := range []string{"drop table if exists " + table, "create table " + table + " (id bigint not null, payload varchar(64), primary key (id))"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "drop table if exists "+table) })
	for i := 0; i < rows; i += 1000 {
		var q strings.Builder
		q.WriteString("insert into " + table + " (id, payload) values ")
		for j := i; j < min(i+1000, rows); j++ {
			if j > i {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "(%d, 'row %d of the cache snapshot measurement')", j+1, j+1)
		}
		if _, err := db.ExecContext(ctx, q.String()); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, append(withDataDir(t), "--pull-cache", "--max-conns-per-token", "0", "--log-level", "info")...)
	proxy := startVarnish(t, g.url, readers/2)
	stream := "cdnsnap-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "commerce", "tables": []string{table}, "start": "snapshot"})

	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: readers, MaxIdleConnsPerHost: readers}}
	defer hc.CloseIdleConnections()
	before := changesRequests(t, g)
	cpu := cpuTicks()
	var clientReqs atomic.Int64
	pagesOf := make([]int, readers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range readers {
		wg.Go(func() {
			n, err := snapshotThrough(ctx, hc, proxy.url, stream, rows, &clientReqs)
			if err != nil {
				t.Errorf("reader %d: %v", i, err)
			}
			pagesOf[i] = n
		})
	}
	wg.Wait()
	took := time.Since(start)
	reached := changesRequests(t, g) - before
	t.Logf("%d readers from the start of a %d-row snapshot through Varnish in %v: %d client requests (%d pages each), %v reached the gateway;%s",
		readers, rows, took.Round(time.Millisecond), clientReqs.Load(), pagesOf[0], reached, cpuSince(cpu))
	for i, n := range pagesOf {
		if n != pagesOf[0] {
			t.Errorf("reader %d read %d pages, reader 0 %d", i, n, pagesOf[0])
			break
		}
	}
	if reached != float64(pagesOf[0]) {
		t.Errorf("%v requests reached the gateway for %d pages: want each page once", reached, pagesOf[0])
	}
}

// snapshotThrough pages a snapshot of rows rows (ids 1…rows) through a
// cache, checking every row arrives once; it returns the pages read.
func snapshotThrough(ctx context.Context, hc *http.Client, base, stream string, rows int, reqs *atomic.Int64) (int, error) {
	seen := make([]bool, rows+1)
	got, cursor := 0, ""
	for pages := 1; pages <= rows/1000*3+100; pages++ {
		q := url.Values{"limit": {"1000"}, "wait": {"5s"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		reqs.Add(1)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/streams/"+stream+"/changes?"+q.Encode(), nil)
		resp, err := hc.Do(req)
		if err != nil {
			return pages, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return pages, fmt.Errorf("page %d: %d %v", pages, resp.StatusCode, err)
		}
		// Scanned, not decoded: 500 readers of 100,000 rows each would
		// spend the machine's CPU on JSON.
		body := string(b)
		for rest := body; ; {
			i := strings.Index(rest, `"key":{"id":`)
			if i < 0 {
				break
			}
			rest = rest[i+len(`"key":{"id":`):]
			j := strings.IndexByte(rest, '}')
			id, err := strconv.Atoi(rest[:j])
			if err != nil || id < 1 || id > rows {
				return pages, fmt.Errorf("page %d: key %q", pages, rest[:j])
			}
			if seen[id] {
				return pages, fmt.Errorf("page %d: row %d twice: …%s", pages, id, body[max(0, len(body)-len(rest)-300):len(body)-len(rest)+100])
			}
			seen[id] = true
			got++
		}
		if strings.Contains(body, `"type":"snapshot_complete"`) {
			if got != rows {
				return pages, fmt.Errorf("snapshot complete after %d of %d rows", got, rows)
			}
			return pages, nil
		}
		i := strings.LastIndex(body, `"next_cursor":"`)
		if i < 0 {
			return pages, fmt.Errorf("page %d without next_cursor", pages)
		}
		cursor, _, _ = strings.Cut(body[i+len(`"next_cursor":"`):], `"`)
	}
	return rows/1000*3 + 100, fmt.Errorf("snapshot not complete after %d pages (%d of %d rows)", rows/1000*3+100, got, rows)
}
