package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtgatepb "vitess.io/vitess/go/vt/proto/vtgate"
	_ "vitess.io/vitess/go/vt/vtgate/grpcvtgateconn"
	"vitess.io/vitess/go/vt/vtgate/vtgateconn"

	vsgclient "github.com/vstream-gateway/vstream-gateway/client"
)

// TestReplayThroughput replays N rows from a saved cursor through a plain
// Go VStream client, the gateway's HTTP pull and its WebSocket, one after
// the other on the same machine, and reports rows/s and the ratios. It is a
// measurement, not a pass/fail test: run it with `make bench`
// (VSG_BENCH=1, rows from VSG_BENCH_ROWS, default 200000).
func TestReplayThroughput(t *testing.T) {
	needE2E(t)
	if os.Getenv("VSG_BENCH") != "1" {
		t.Skip("set VSG_BENCH=1 (make bench)")
	}
	rows := 200000
	if s := os.Getenv("VSG_BENCH_ROWS"); s != "" {
		rows, _ = strconv.Atoi(s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	flags := withDataDir(t)
	// VSG_BENCH_PROFILE=127.0.0.1:6060 records a 2 s CPU profile of the
	// gateway into /tmp/vsg-bench.pprof while VSG_BENCH_PROFILE_RUN (a
	// contender's name, default "gateway WebSocket") runs its first round.
	debug := os.Getenv("VSG_BENCH_PROFILE")
	profiled := os.Getenv("VSG_BENCH_PROFILE_RUN")
	if profiled == "" {
		profiled = "gateway WebSocket"
	}
	if debug != "" {
		flags = append(flags, "--debug-listen", debug)
	}
	// VSG_BENCH_RING_ENTRIES=0 replays through a VStream of the reader's
	// own (the catch-up path); by default a saved cursor the stream's ring
	// still covers is replayed from memory.
	ring := "default"
	if r := os.Getenv("VSG_BENCH_RING_ENTRIES"); r != "" {
		flags = append(flags, "--ring-entries", r)
		ring = r
	}
	layout := splitCPUs(t)
	t.Logf("CPU layout: %s", layout)
	g := startGateway(t, flags...)
	stream := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e6)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	token := initialCursor(t, ctx, g, stream)
	vgtid := currentVGtid(t, ctx)

	// Load: multi-row inserts, 1000 rows per transaction.
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadStart := time.Now()
	for done := 0; done < rows; done += 1000 {
		var sb strings.Builder
		sb.WriteString("insert into customer(email) values ")
		for i := 0; i < 1000 && done+i < rows; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('bench-%d@example.com')", done+i)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("loaded %d rows in %v", rows, time.Since(loadStart).Round(time.Millisecond))
	idleRSS := rssKiB(g)

	// Three rounds, each contender once per round, best of three: the
	// machine is shared with the cluster and runs vary by ±10 %; the first pull finds the subscription its initial
	// cursor parked, with up to --read-ahead of rows already read.
	type contender struct {
		name string
		run  func() (int, time.Duration, error)
		best float64
		skip bool
	}
	cs := []*contender{
		{name: "plain VStream client", run: wall(func() (int, error) { return plainReplay(ctx, vgtid, rows) })},
		{name: "gateway HTTP pull", run: wall(func() (int, error) { return pullReplay(ctx, g, stream, token, rows) })},
		{name: "gateway WebSocket", run: wall(func() (int, error) { return wsReplay(ctx, g, stream, token, rows, false) })},
		{name: "gateway WebSocket batch", run: wall(func() (int, error) { return wsReplay(ctx, g, stream, token, rows, true) })},
		{name: "gateway WebSocket raw", run: wall(func() (int, error) { return wsRawReplay(ctx, g, stream, token, rows, false) })},
		{name: "gateway SSE", run: wall(func() (int, error) { return sseReplay(ctx, g, stream, token, rows) })},
		{name: "Go client WebSocket", run: wall(func() (int, error) { return goClientReplay(ctx, g, stream, token, rows, vsgclient.WebSocket) })},
		{name: "Go client SSE", run: wall(func() (int, error) { return goClientReplay(ctx, g, stream, token, rows, vsgclient.SSE) })},
		{name: "Go client poll", run: wall(func() (int, error) { return goClientReplay(ctx, g, stream, token, rows, vsgclient.Poll) })},
		{name: "JS client (Node) ws", run: func() (int, time.Duration, error) { return jsReplay(ctx, t, g, stream, token, "ws", rows) }},
		{name: "JS client (Node) sse", run: func() (int, time.Duration, error) { return jsReplay(ctx, t, g, stream, token, "sse", rows) }},
	}
	// VSG_BENCH_ONLY=a,b runs only the contenders whose names contain one
	// of the words, and the plain client, which every ratio needs; the
	// others report 0.
	if only := os.Getenv("VSG_BENCH_ONLY"); only != "" {
		for _, c := range cs[1:] {
			c.skip = !containsAny(c.name, strings.Split(only, ","))
		}
	}
	var peakRSS int
	stopRSS := sampleRSS(g, &peakRSS)
	for round := 1; round <= 3; round++ {
		for _, c := range cs {
			if c.skip {
				continue
			}
			// Every contender starts alike. A VStream that ends leaves its
			// MariaDB binlog dump thread behind until the thread next
			// writes, and vttablet reuses the replica server id, so the
			// next VStream waits ≈0.1 s for MariaDB to kill that thread.
			// A binlog rotation wakes and ends such threads.
			if err := cluster.FlushBinaryLogs(ctx, "customer"); err != nil {
				t.Fatal(err)
			}
			stop := func() {}
			if round == 1 && c.name == profiled {
				stop = profile(t, debug, "/tmp/vsg-bench.pprof")
			}
			if r := measure(t, c.name, rows, c.run); r > c.best {
				c.best = r
			}
			stop()
		}
	}
	stopRSS()
	plain, pull, ws, wsb, raw, sse := cs[0].best, cs[1].best, cs[2].best, cs[3].best, cs[4].best, cs[5].best
	gows, gosse, gopoll, jsws, jssse := cs[6].best, cs[7].best, cs[8].best, cs[9].best, cs[10].best
	t.Logf("RESULT %s, --ring-entries %s", layout, ring)
	t.Logf("RESULT rows=%d plain=%.0f rows/s pull=%.0f rows/s (%.2fx) ws=%.0f rows/s (%.2fx) ws-batch=%.0f rows/s (%.2fx) ws-raw-client=%.0f rows/s (%.2fx) sse=%.0f rows/s (%.2fx) gateway RSS idle=%d KiB peak=%d KiB",
		rows, plain, pull, pull/plain, ws, ws/plain, wsb, wsb/plain, raw, raw/plain, sse, sse/plain, idleRSS, peakRSS)
	t.Logf("RESULT Go client (every event decoded into its type): ws=%.0f rows/s (%.2fx) sse=%.0f rows/s (%.2fx) poll=%.0f rows/s (%.2fx)",
		gows, gows/plain, gosse, gosse/plain, gopoll, gopoll/plain)
	t.Logf("RESULT JS client (Node 20, every event parsed, second read of its process): ws=%.0f rows/s (%.2fx) sse=%.0f rows/s (%.2fx)", jsws, jsws/plain, jssse, jssse/plain)
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if w != "" && strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// wall times a contender by the clock around it.
func wall(f func() (int, error)) func() (int, time.Duration, error) {
	return func() (int, time.Duration, error) { n, err := f(); return n, 0, err }
}

// measure runs a contender and reports its rows/s over the time it says it
// took (a Node reader times itself from its first connection, as the Go
// readers are timed, leaving out the start of its process), or else over
// the time the call took.
func measure(t *testing.T, name string, want int, f func() (int, time.Duration, error)) float64 {
	cpu := cpuTicks()
	start := time.Now()
	n, own, err := f()
	d := time.Since(start)
	if own > 0 {
		d = own
	}
	used := cpuSince(cpu)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if n != want {
		t.Fatalf("%s: got %d rows, want %d", name, n, want)
	}
	rate := float64(n) / d.Seconds()
	t.Logf("%-24s %d rows in %v = %.0f rows/s; CPU:%s", name, n, d.Round(time.Millisecond), rate, used)
	return rate
}

func currentVGtid(t *testing.T, ctx context.Context) *binlogdatapb.VGtid {
	conn, err := vtgateconn.Dial(ctx, cluster.VtgateAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := conn.VStream(sctx, topodatapb.TabletType_PRIMARY,
		&binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "customer", Gtid: "current"}}},
		benchFilter(), &vtgatepb.VStreamFlags{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		evs, err := r.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			// Until every shard has reported, some still say "current".
			if e.Type == binlogdatapb.VEventType_VGTID && !strings.Contains(e.Vgtid.String(), `"current"`) {
				return e.Vgtid
			}
		}
	}
}

func benchFilter() *binlogdatapb.Filter {
	return &binlogdatapb.Filter{Rules: []*binlogdatapb.Rule{{Match: "customer", Filter: "select * from `customer`"}}}
}

// plainReplay is what a user would write with vtgateconn directly: the
// baseline the gateway is measured against. Same flags as the gateway.
func plainReplay(ctx context.Context, vgtid *binlogdatapb.VGtid, want int) (int, error) {
	conn, err := vtgateconn.Dial(ctx, cluster.VtgateAddr())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := conn.VStream(sctx, topodatapb.TabletType_PRIMARY, vgtid, benchFilter(),
		&vtgatepb.VStreamFlags{HeartbeatInterval: 1, IncludeReshardJournalEvents: true, ExcludeKeyspaceFromTableName: true})
	if err != nil {
		return 0, err
	}
	n := 0
	for n < want {
		evs, err := r.Recv()
		if err != nil {
			return n, err
		}
		for _, e := range evs {
			if e.Type == binlogdatapb.VEventType_ROW {
				n += len(e.RowEvent.RowChanges)
			}
		}
	}
	return n, nil
}

// pullReplay reads NDJSON, the format for streaming consumers: one event
// per line, the next cursor in a header. It counts lines (a consumer that
// decodes every event measures its JSON library, not the gateway).
func pullReplay(ctx context.Context, g *gateway, stream, cursor string, want int) (int, error) {
	n := 0
	var buf bytes.Buffer // reused, as by the WebSocket consumers
	for n < want {
		q := url.Values{"cursor": {cursor}, "limit": {"10000"}, "wait": {"5s"}}
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/streams/"+stream+"/changes?"+q.Encode(), nil)
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return n, err
		}
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return n, err
		}
		b := buf.Bytes()
		if resp.StatusCode != 200 {
			return n, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		n += bytes.Count(b, []byte{'\n'})
		cursor = resp.Header.Get("Vsg-Next-Cursor")
	}
	return n, nil
}

// sseReplay reads the event stream as a plain HTTP client would, counting
// change events.
func sseReplay(ctx context.Context, g *gateway, stream, cursor string, want int) (int, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", g.url+"/v1/streams/"+stream+"/sse?cursor="+url.QueryEscape(cursor), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 1<<16)
	change := []byte("event: change\n")
	n := 0
	for n < want {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return n, err
		}
		if bytes.Equal(line, change) {
			n++
		}
	}
	return n, nil
}

func wsReplay(ctx context.Context, g *gateway, stream, cursor string, want int, batch bool) (int, error) {
	u := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/streams/" + stream + "/ws?cursor=" + url.QueryEscape(cursor)
	if batch {
		u += "&batch=txn"
	}
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return 0, err
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	// Reads take a context without a deadline: coder/websocket arms and
	// disarms a context watcher per message otherwise, which costs this
	// consumer more than the gateway spends on the message. One watcher
	// for the whole connection does the same job.
	defer context.AfterFunc(ctx, func() { c.CloseNow() })()
	rctx := context.Background()
	n := 0
	change := []byte(`{"type":"change"`)
	var buf bytes.Buffer // reused: a consumer that keeps up does not allocate per message
	for n < want {
		_, r, err := c.Reader(rctx)
		if err != nil {
			return n, err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return n, err
		}
		n += bytes.Count(buf.Bytes(), change)
	}
	return n, nil
}

func rssKiB(g *gateway) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
	}
	return 0
}

// sampleRSS records the gateway's peak RSS until the returned stop is called.
func sampleRSS(g *gateway, peak *int) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			if r := rssKiB(g); r > *peak {
				*peak = r
			}
			select {
			case <-done:
				return
			case <-tk.C:
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// profile records a CPU profile and an allocation profile of the gateway
// (served on debug) into file and file-allocs
// until the returned stop is called.
func profile(t *testing.T, debug, file string) func() {
	if debug == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/profile?seconds=2", file},
		{"/debug/pprof/allocs?seconds=2", strings.TrimSuffix(file, ".pprof") + "-allocs.pprof"},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get("http://" + debug + p.path)
			if err != nil {
				t.Logf("profile: %v", err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			os.WriteFile(p.file, b, 0o644)
			t.Logf("profile of the gateway in %s", p.file)
		}()
	}
	return wg.Wait
}

// wsRawReplay is a minimal WebSocket consumer: the upgrade by hand, then
// frames parsed straight off a buffered TCP reader (server frames are not
// masked). It shows what the gateway sends when the client library's
// per-message cost is taken out.
func wsRawReplay(ctx context.Context, g *gateway, stream, cursor string, want int, batch bool) (int, error) {
	addr := strings.TrimPrefix(g.url, "http://")
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	path := "/v1/streams/" + stream + "/ws?cursor=" + url.QueryEscape(cursor)
	if batch {
		path += "&batch=txn"
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	br := bufio.NewReaderSize(conn, 1<<20)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return 0, fmt.Errorf("upgrade: %s", resp.Status)
	}
	change := []byte(`{"type":"change"`)
	var hdr [8]byte
	payload := make([]byte, 0, 1<<16)
	n := 0
	for n < want {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			return n, err
		}
		opcode, size := hdr[0]&0x0f, uint64(hdr[1]&0x7f)
		switch size {
		case 126:
			if _, err := io.ReadFull(br, hdr[:2]); err != nil {
				return n, err
			}
			size = uint64(binary.BigEndian.Uint16(hdr[:2]))
		case 127:
			if _, err := io.ReadFull(br, hdr[:8]); err != nil {
				return n, err
			}
			size = binary.BigEndian.Uint64(hdr[:8])
		}
		if cap(payload) < int(size) {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if _, err := io.ReadFull(br, payload); err != nil {
			return n, err
		}
		switch opcode {
		case 0x8:
			return n, fmt.Errorf("closed by the gateway: %q", payload)
		case 0x0, 0x1:
			n += bytes.Count(payload, change)
		}
	}
	return n, nil
}

// goClientReplay reads with the Go client (package client), which decodes
// every event into its Go type and hands over whole transactions: what an
// application using it gets, JSON decoding included.
func goClientReplay(ctx context.Context, g *gateway, stream, cursor string, want int, tr vsgclient.Transport) (int, error) {
	c, err := vsgclient.Dial(ctx, g.url, stream, vsgclient.WithCursor(cursor), vsgclient.WithTransport(tr),
		vsgclient.WithPoll(5*time.Second, 10000))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n := 0
	for n < want {
		txn, err := c.Next(ctx)
		if err != nil {
			return n, err
		}
		for _, e := range txn.Events {
			if _, ok := e.(*vsgclient.Change); ok {
				n++
			}
		}
	}
	return n, nil
}
