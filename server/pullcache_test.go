package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// cacheGateway is a gateway on a fake vtgate serving one stream,
// "customers" (customer/0, on_gap fail), with the flags given.
type cacheGateway struct {
	s    *Server
	h    http.Handler
	fake *fakevtgate.Server
	s0   fakevtgate.Shard
}

func newCacheGateway(t *testing.T, flags ...string) *cacheGateway {
	t.Helper()
	loadSpec(t)
	fake := fakevtgate.New(t)
	fake.SetResult("show vitess_keyspaces", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Databases", "varchar"), "customer"))
	fake.SetResult("select * from `customer` limit 0", sqltypes.MakeTestResult(sqltypes.MakeTestFields("customer_id|email", "int64|varchar")))
	fake.SetTopology("customer", []string{"0"}, nil)
	args := append([]string{"--insecure-no-auth", "--vtgate", fake.Addr, "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--max-conns-per-token", "0"}, flags...)
	cfg, err := ParseFlags(args, env())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeBackends)
	g := &cacheGateway{s: s, h: s.Handler(), fake: fake, s0: fakevtgate.Shard{Keyspace: "customer", Name: "0"}}
	resp, body := doRequest(t, g.h, httptest.NewRequest("POST", "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer"],"on_gap":"fail"}`)))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	return g
}

func pos(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid("customer", "0", "MariaDB/0-1-"+itoa(n)) }

// rows is n one-row transactions from from on.
func (g *cacheGateway) rows(from, n int) [][]*binlogdatapb.VEvent {
	field := g.s0.Field("customer", fakevtgate.BigintPK("customer_id"), fakevtgate.LongText("email"))
	var out [][]*binlogdatapb.VEvent
	for i := from; i < from+n; i++ {
		now := time.Now().Unix() // a live commit: the reader is caught up
		txn := g.s0.Txn(now, pos(i), g.s0.Insert("customer", now, []string{itoa(i), "r" + itoa(i) + "@x"}))
		if i == from {
			txn = append([]*binlogdatapb.VEvent{field}, txn...)
		}
		out = append(out, txn)
	}
	return out
}

// start opens the stream's tail at position 10 with the first poll and
// returns its cursor and the tail's VStream call.
func (g *cacheGateway) start(t *testing.T) (string, *fakevtgate.Call) {
	t.Helper()
	g.fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{g.s0.Pos(pos(10))}}})
	resp, body := g.get(t, "/v1/streams/customers/changes?wait=0", nil)
	c10 := resp.Header.Get("Vsg-Next-Cursor")
	if resp.StatusCode != http.StatusOK || c10 == "" {
		t.Fatalf("first page: %d %s", resp.StatusCode, body)
	}
	return c10, g.fake.Call(t, 0)
}

func (g *cacheGateway) get(t *testing.T, target string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	return doRequest(t, g.h, req)
}

type pullPage struct {
	Events     []json.RawMessage `json:"events"`
	NextCursor string            `json:"next_cursor"`
	UpToDate   bool              `json:"up_to_date"`
}

// Without --pull-cache every page is no-store, as before caching existed;
// the scope hash is sent all the same.
func TestPullNoCacheByDefault(t *testing.T) {
	g := newCacheGateway(t)
	c10, tail := g.start(t)
	tail.Answer(t, fakevtgate.Script{Open: true, Batches: g.rows(11, 3)})
	resp, body := g.get(t, "/v1/streams/customers/changes?limit=1&cursor="+c10, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("ETag") != "" {
		t.Errorf("whole page without --pull-cache: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if len(resp.Header.Get("Vsg-Scope")) != 16 {
		t.Errorf("Vsg-Scope %q", resp.Header.Get("Vsg-Scope"))
	}
}

// With --pull-cache: a whole page is public for a week with a strong ETag
// (If-None-Match: 304), a named subscriber's page private, a live page
// 5 s, errors no-store; bad cache parameters are 4xx JSON errors.
func TestPullCacheHeaders(t *testing.T) {
	g := newCacheGateway(t, "--pull-cache")
	c10, tail := g.start(t)
	tail.Answer(t, fakevtgate.Script{Open: true, Batches: g.rows(11, 3)})

	whole := "/v1/streams/customers/changes?limit=1&wait=5s&cursor=" + c10
	resp, body := g.get(t, whole, nil)
	var p pullPage
	json.Unmarshal(body, &p)
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || len(p.Events) != 1 || p.UpToDate {
		t.Fatalf("whole page: %d %s", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=604800, stale-while-revalidate=604800" || !strings.HasPrefix(etag, `"`) || resp.Header.Get("Vary") != "Accept" {
		t.Errorf("whole page headers: %v", resp.Header)
	}
	resp, body = g.get(t, whole, http.Header{"If-None-Match": {`"x", ` + etag}})
	if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("If-None-Match the page's ETag: %d %s", resp.StatusCode, body)
	}
	// NDJSON is another representation: another ETag.
	resp, _ = g.get(t, whole, http.Header{"Accept": {"application/x-ndjson"}})
	if e := resp.Header.Get("ETag"); e == "" || e == etag {
		t.Errorf("NDJSON page ETag %q, JSON's %q", e, etag)
	}

	// The rest is at the live end: 5 s, collapsed on its key.
	resp, body = g.get(t, "/v1/streams/customers/changes?wait=5s&cursor="+p.NextCursor, nil)
	json.Unmarshal(body, &p)
	if resp.StatusCode != 200 || len(p.Events) != 2 || !p.UpToDate || resp.Header.Get("Cache-Control") != "public, max-age=5, stale-while-revalidate=5" {
		t.Errorf("live page: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if resp.Header.Get("Vsg-Interval") == "" {
		t.Errorf("live page without Vsg-Interval: %v", resp.Header)
	}
	// A long-poll that times out at the same cursor: kept only for a
	// request that moves its URL on with interval= (else a cache would
	// answer the next poll at once with it, for max-age).
	head := p.NextCursor
	for _, c := range []struct{ query, cc string }{
		{"", "no-store"},
		{"&interval=" + resp.Header.Get("Vsg-Interval"), "public, max-age=5, stale-while-revalidate=5"},
	} {
		resp, body := g.get(t, "/v1/streams/customers/changes?wait=200ms&cursor="+head+c.query, nil)
		json.Unmarshal(body, &p)
		if resp.StatusCode != 200 || len(p.Events) != 0 || p.NextCursor != head || resp.Header.Get("Cache-Control") != c.cc {
			t.Errorf("timed out at the head%s: %d %v %s, want %s", c.query, resp.StatusCode, resp.Header, body, c.cc)
		}
		if n, _ := strconv.ParseInt(resp.Header.Get("Vsg-Interval"), 10, 64); c.query != "" && strconv.FormatInt(n, 10) == strings.TrimPrefix(c.query, "&interval=") {
			t.Errorf("the interval did not move on after an empty answer: %v", resp.Header)
		}
	}
	resp, body = g.get(t, "/v1/streams/customers/changes?limit=1&subscriber=bob&cursor="+c10, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "private, no-store" || resp.Header.Get("ETag") != "" {
		t.Errorf("named subscriber's page: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	for _, bad := range []struct{ query, code string }{
		{"limit=0", "invalid_limit"},
		{"interval=-1", "invalid_interval"},
		{"interval=x", "invalid_interval"},
		{"restart=NOPE", "invalid_restart"},
		{"restart=a&restart=b", "invalid_restart"},
		{"scope=AAAAAAAAAAAAAAAA", "scope_mismatch"},
		{"cursor=garbage", "invalid_cursor"},
	} {
		resp, body := g.get(t, "/v1/streams/customers/changes?"+bad.query, nil)
		var e apiError
		json.Unmarshal(body, &e)
		if resp.StatusCode/100 != 4 || e.Error.Code != bad.code || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %v %s, want 4xx %s no-store", bad.query, resp.StatusCode, resp.Header, body, bad.code)
		}
		if bad.code == "scope_mismatch" && len(resp.Header.Get("Vsg-Scope")) != 16 {
			t.Errorf("scope_mismatch without the token's scope: %v", resp.Header)
		}
	}
}

// Identical live long-polls at the head are one page: made once, written
// to every poller, byte for byte; the tail is the only VStream.
func TestPullCollapsesLivePolls(t *testing.T) {
	g := newCacheGateway(t)
	c10, tail := g.start(t)
	const n = 20
	before := collapsed(t)
	target := "/v1/streams/customers/changes?wait=30s&cursor=" + c10
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, body := g.get(t, target, nil)
			bodies[i] = string(body)
		})
	}
	// Every poller waits in the flight before the row comes.
	wait.For(t, "every poll in flight", 30*time.Second, func() bool { return pullsInFlight(t) == n })
	tail.Answer(t, fakevtgate.Script{Open: true, Batches: g.rows(11, 1)})
	wg.Wait()
	var p pullPage
	if err := json.Unmarshal([]byte(bodies[0]), &p); err != nil || len(p.Events) != 1 {
		t.Fatalf("page: %s", bodies[0])
	}
	for i, b := range bodies {
		if b != bodies[0] {
			t.Errorf("poller %d got another page: %s", i, b)
		}
	}
	if got := collapsed(t) - before; got != n-1 {
		t.Errorf("%v requests collapsed, want %d", got, n-1)
	}
	if c := g.fake.Calls(); c != 1 {
		t.Errorf("%d VStreams, want the tail's only", c)
	}
}

// A cursor that cannot be resumed (its shard is gone, on_gap fail) is a
// 409 naming a restart URL; following it gets the rows of a fresh
// snapshot, not another 409. With --pull-cache the 409 may be kept.
func TestPullConflictRestarts(t *testing.T) {
	g := newCacheGateway(t, "--pull-cache")
	old, err := g.s.API().Hub.Token(context.Background(), &streams.Definition{Name: "customers", Keyspace: "customer"},
		fakevtgate.VGtid("customer", "-80", "MariaDB/0-1-5"))
	if err != nil {
		t.Fatal(err)
	}
	resp, body := g.get(t, "/v1/streams/customers/changes?limit=5&cursor="+old, nil)
	var e struct {
		Error struct{ Code, Restart string } `json:"error"`
	}
	json.Unmarshal(body, &e)
	if resp.StatusCode != http.StatusConflict || e.Error.Code != "resume_impossible" {
		t.Fatalf("old cursor: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Vsg-Restart") != e.Error.Restart || !strings.Contains(e.Error.Restart, "start=snapshot") ||
		!strings.Contains(e.Error.Restart, "restart=") || strings.Contains(e.Error.Restart, "cursor=") || !strings.Contains(e.Error.Restart, "limit=5") {
		t.Errorf("restart %q (header %q)", e.Error.Restart, resp.Header.Get("Vsg-Restart"))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, max-age=3600, stale-while-revalidate=3600" {
		t.Errorf("409 Cache-Control %q", cc)
	}
	// The restart is a snapshot: vtgate copies the table, then streams.
	copying := fakevtgate.VGtid("customer", "0", "MariaDB/0-1-20")
	copying.ShardGtids[0].TablePKs = []*binlogdatapb.TableLastPK{{TableName: "customer"}}
	copyRows := [][]*binlogdatapb.VEvent{
		g.s0.Txn(0, copying, g.s0.Field("customer", fakevtgate.BigintPK("customer_id"), fakevtgate.LongText("email"))),
		g.s0.Txn(0, copying, g.s0.Insert("customer", 0, []string{"1", "a@x"}, []string{"2", "b@x"})),
		{g.s0.CopyCompleted()},
		{fakevtgate.StreamCopied()},
	}
	calls := g.fake.Calls()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, body = g.get(t, e.Error.Restart, nil)
	}()
	// The snapshot's VStream (from no GTID: a copy) gets the rows; a
	// tail's (from "current") is left waiting.
	for i := calls; ; i++ {
		c := g.fake.Call(t, i)
		if c.Req.Vgtid.ShardGtids[0].Gtid == "" {
			c.Answer(t, fakevtgate.Script{Open: true, Batches: copyRows})
			break
		}
	}
	<-done
	var p pullPage
	json.Unmarshal(body, &p)
	if resp.StatusCode != 200 || len(p.Events) == 0 {
		t.Fatalf("following the restart: %d %s", resp.StatusCode, body)
	}
}

func collapsed(t *testing.T) float64 {
	return metricValue(t, "vsg_pull_collapsed_total", map[string]string{"stream": "customers"})
}

func pullsInFlight(t *testing.T) int {
	return int(metricValue(t, "vsg_stream_clients", map[string]string{"stream": "customers", "transport": "pull"}))
}

// metricValue is the value of the series of name with labels (0 if none).
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// A snapshot page whose wait ends before vtgate sends more of the copy
// (a big table, a slow tablet) does not move the cursor: it says it is not
// up to date, so that its reader asks again at once, and it is no-store,
// so that asking again reaches the gateway. Kept by a cache like the pages
// around it, it would hold every reader at that cursor for a week.
func TestPullCopyStallNotKept(t *testing.T) {
	g := newCacheGateway(t, "--pull-cache")
	copying := func(last string) *binlogdatapb.VGtid {
		v := fakevtgate.VGtid("customer", "0", "MariaDB/0-1-20")
		v.ShardGtids[0].TablePKs = []*binlogdatapb.TableLastPK{{TableName: "customer", Lastpk: sqltypes.ResultToProto3(
			sqltypes.MakeTestResult(sqltypes.MakeTestFields("customer_id", "int64"), last))}}
		return v
	}
	calls := g.fake.Calls()
	type answer struct {
		resp *http.Response
		body []byte
	}
	first := make(chan answer, 1)
	go func() {
		resp, body := g.get(t, "/v1/streams/customers/changes?start=snapshot&limit=10", nil)
		first <- answer{resp, body}
	}()
	var snap *fakevtgate.Call
	for i := calls; snap == nil; i++ {
		if c := g.fake.Call(t, i); c.Req.Vgtid.ShardGtids[0].Gtid == "" {
			snap = c
		}
	}
	snap.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		g.s0.Txn(0, copying("2"), g.s0.Field("customer", fakevtgate.BigintPK("customer_id"), fakevtgate.LongText("email")),
			g.s0.Insert("customer", 0, []string{"1", "a@x"}, []string{"2", "b@x"})),
	}})
	a := <-first
	var p pullPage
	json.Unmarshal(a.body, &p)
	if a.resp.StatusCode != 200 || len(p.Events) != 2 || p.UpToDate {
		t.Fatalf("first page: %d %s", a.resp.StatusCode, a.body)
	}

	// The copy sends nothing within the wait.
	stalled := "/v1/streams/customers/changes?limit=10&wait=200ms&cursor=" + p.NextCursor
	resp, body := g.get(t, stalled, nil)
	var s pullPage
	json.Unmarshal(body, &s)
	if resp.StatusCode != 200 || len(s.Events) != 0 || s.NextCursor != p.NextCursor {
		t.Fatalf("stalled page: %d %s", resp.StatusCode, body)
	}
	if s.UpToDate || resp.Header.Get("Vsg-Up-To-Date") != "false" {
		t.Errorf("a copy in progress says it is up to date: %s", body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" || resp.Header.Get("ETag") != "" {
		t.Errorf("a page that did not move the cursor may be kept: %v", resp.Header)
	}

	// Asked again, the same URL gets the rest of the copy.
	snap.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{
		g.s0.Txn(0, copying("3"), g.s0.Insert("customer", 0, []string{"3", "c@x"})),
		{g.s0.CopyCompleted()},
		{fakevtgate.StreamCopied()},
	}})
	resp, body = g.get(t, stalled, nil)
	var n pullPage
	json.Unmarshal(body, &n)
	if resp.StatusCode != 200 || len(n.Events) == 0 || n.NextCursor == p.NextCursor {
		t.Fatalf("asked again: %d %s", resp.StatusCode, body)
	}
	if g.fake.Calls() > calls+2 {
		t.Errorf("%d VStreams: the stalled reader's subscription was not kept for its next page", g.fake.Calls()-calls)
	}
}
