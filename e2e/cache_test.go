package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/cursor"
)

// cachedReader pulls pages through a cache with its token and scope hash.
type cachedReader struct {
	base, stream, token, scope string
	urls                       []string // the URLs of the pages it read, in order
	stalls                     int      // snapshot pages that did not move the cursor
}

// page asks one page; it returns the events, the next cursor, the
// response's headers and status.
func (r *cachedReader) page(ctx context.Context, q url.Values) ([]ev, string, http.Header, int, error) {
	q.Set("scope", r.scope)
	u := "/v1/streams/" + r.stream + "/changes?" + q.Encode()
	r.urls = append(r.urls, u)
	req, err := http.NewRequestWithContext(ctx, "GET", r.base+u, nil)
	if err != nil {
		return nil, "", nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return nil, "", resp.Header, resp.StatusCode, errors.Join(err, fmt.Errorf("%s: %d %s", u, resp.StatusCode, b))
	}
	var p struct {
		Events     []json.RawMessage `json:"events"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, "", nil, 0, err
	}
	var evs []ev
	for _, raw := range p.Events {
		e, err := parseEvent(raw)
		if err != nil {
			return nil, "", nil, 0, err
		}
		evs = append(evs, e)
	}
	return evs, p.NextCursor, resp.Header, resp.StatusCode, nil
}

// snapshot pages from the stream's start to snapshot_complete, returning
// the customer ids copied and the cursor after the last page. A page that
// did not move the cursor (the copy sent nothing within the wait) must be
// no-store, so that asking again reaches the gateway; it is counted in
// r.stalls and left out of r.urls, the pages a cache may keep.
func (r *cachedReader) snapshot(ctx context.Context, limit, maxPages int) (ids []string, cursor string, err error) {
	for range maxPages {
		q := url.Values{"limit": {strconv.Itoa(limit)}, "wait": {"2s"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		evs, next, h, _, err := r.page(ctx, q)
		if err != nil {
			return nil, "", err
		}
		cc := h.Get("Cache-Control")
		if next == cursor && len(evs) == 0 {
			if cc != "no-store" || h.Get("Vsg-Up-To-Date") != "false" {
				return nil, "", fmt.Errorf("snapshot page %s did not move the cursor: Cache-Control %s, up to date %s; want no-store, false",
					r.urls[len(r.urls)-1], cc, h.Get("Vsg-Up-To-Date"))
			}
			r.urls = r.urls[:len(r.urls)-1]
			r.stalls++
			continue
		}
		if cc == "no-store" {
			return nil, "", fmt.Errorf("snapshot page %s: Cache-Control %s", r.urls[len(r.urls)-1], cc)
		}
		cursor = next
		for _, e := range evs {
			switch {
			case e.Type == "snapshot_complete":
				return ids, cursor, nil
			case e.Type == "change" && e.Table == "customer":
				ids = append(ids, string(e.Key["customer_id"]))
			}
		}
	}
	return nil, "", fmt.Errorf("snapshot not complete after %d pages", maxPages)
}

// scopeOf asks the gateway, through the cache, for token's scope hash:
// a request naming no valid one is refused with it, before anything opens.
func scopeOf(t *testing.T, base, stream, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/streams/"+stream+"/changes?scope=-", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s := resp.Header.Get("Vsg-Scope")
	if resp.StatusCode != http.StatusForbidden || len(s) != 16 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("scope probe: %d %v", resp.StatusCode, resp.Header)
	}
	return s
}

// changesRequests is how many pull requests reached the gateway.
func changesRequests(t *testing.T, g *gateway) float64 {
	return metricSum(t, g, "vsg_http_requests_total", `route="/v1/streams/{stream}/changes"`)
}

// Pull pages through a real caching proxy (Varnish, as operators put a
// CDN in front; examples/varnish/gateway.vcl), with tokens:
//   - readers paging a snapshot at once each get every row once, and each
//     page leaves the gateway once;
//   - a token of another scope addresses other URLs and never gets the
//     first scope's rows; naming the first scope is refused, uncached;
//   - pollers in step at the live end get every new row once, and the
//     gateway sees each live URL at most once.
func TestPullBehindCache(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := make([]byte, 32)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	g := startGateway(t, append(withDataDir(t), "--jwt-secret", secret, "--jwt-audience", "vsg-e2e", "--jwt-issuer", "e2e",
		"--pull-cache", "--pull-live-linger", "200ms", "--max-conns-per-token", "0")...)
	ag := &authGateway{gateway: g, secret: []byte(secret)}
	proxy := startVarnish(t, g.url, 50)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream := "cdn-" + suffix
	admin := ag.token(t, "ops", []string{"*"}, []string{"*"}, "admin")
	if st, body, err := ag.call(ctx, "POST", "/v1/streams", admin,
		`{"name":"`+stream+`","keyspace":"customer","tables":["customer","corder"],"start":"snapshot"}`, nil); err != nil || st != 201 {
		t.Fatalf("create stream: %d %s %v", st, body, err)
	}
	w := newWriter(t, "cdn"+suffix)
	if err := w.insert(ctx, "before", 50); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range customerIDs(t, ctx) {
		want[id] = true
	}
	tokA := ag.token(t, "alice", []string{stream}, []string{"customer.*"}, "")
	tokB := ag.token(t, "bob", []string{stream}, []string{"customer.corder"}, "")
	scopeA, scopeB := scopeOf(t, proxy.url, stream, tokA), scopeOf(t, proxy.url, stream, tokB)
	if scopeA == scopeB {
		t.Fatalf("two scopes, one hash %s", scopeA)
	}

	// Readers paging the snapshot at once, in about twenty pages
	// whatever the rows earlier tests left in the table.
	const readers = 6
	limit := max(50, len(want)/20)
	maxPages := 4*len(want)/limit + 100
	before := changesRequests(t, g)
	rs := make([]*cachedReader, readers)
	ids := make([][]string, readers)
	var last string
	var wg sync.WaitGroup
	for i := range rs {
		rs[i] = &cachedReader{base: proxy.url, stream: stream, token: tokA, scope: scopeA}
		wg.Go(func() {
			got, cursor, err := rs[i].snapshot(ctx, limit, maxPages)
			if err != nil {
				t.Errorf("reader %d: %v", i, err)
			}
			ids[i] = got
			if i == 0 {
				last = cursor
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i := range rs {
		checkIDs(t, fmt.Sprintf("snapshot reader %d through the cache", i), ids[i], want)
		if !slices.Equal(rs[i].urls, rs[0].urls) {
			t.Errorf("reader %d asked other pages than reader 0", i)
		}
	}
	// Each page a cache may keep reaches the gateway once; a page that
	// did not move the cursor (no-store) does each time it is asked.
	pages, stalls := len(rs[0].urls), 0
	for _, r := range rs {
		stalls += r.stalls
	}
	if n := changesRequests(t, g) - before; n < float64(pages) || n > float64(pages+stalls) {
		t.Errorf("%d readers paged a snapshot of %d pages (and %d pages that did not move): %v requests reached the gateway, want %d (each page once) to %d",
			readers, pages, stalls, n, pages, pages+stalls)
	}
	t.Logf("snapshot: %d rows, %d readers × %d pages through the cache (%d that did not move), %v reached the gateway", len(want), readers, pages, stalls, changesRequests(t, g)-before)

	// Another scope: the same cursors, other URLs, none of A's rows.
	rb := &cachedReader{base: proxy.url, stream: stream, token: tokB, scope: scopeB}
	idsB, _, err := rb.snapshot(ctx, limit, maxPages)
	if err != nil || len(idsB) != 0 {
		t.Errorf("scope %s read %d customer rows (%v)", scopeB, len(idsB), err)
	}
	// Naming A's scope with B's token: refused, and not kept.
	before = changesRequests(t, g)
	for range 2 {
		wrong := &cachedReader{base: proxy.url, stream: stream, token: tokB, scope: scopeA}
		_, _, h, st, _ := wrong.page(ctx, url.Values{"limit": {"7"}})
		if st != http.StatusForbidden || h.Get("Cache-Control") != "no-store" || h.Get("Vsg-Scope") != scopeB {
			t.Errorf("B naming A's scope: %d %v", st, h)
		}
	}
	if n := changesRequests(t, g) - before; n != 2 {
		t.Errorf("the refusals reached the gateway %v times, want 2 (never cached)", n)
	}

	livePollers(t, ctx, g, w, proxy.url, stream, tokA, scopeA, last)
}

// livePollers has pollers in step at the live end (from cursor) read the
// rows written meanwhile through the cache, each once, and checks that
// the gateway saw each live URL at most once.
func livePollers(t *testing.T, ctx context.Context, g *gateway, w *writer, base, stream, token, scope, cursor string) {
	t.Helper()
	const pollers, rows = 20, 40
	from := len(w.since(0))
	before := changesRequests(t, g)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	got := make([][]ev, pollers) // under mu: the pollers append while the check reads
	var mu sync.Mutex
	ps := make([]*cachedReader, pollers)
	var wg sync.WaitGroup
	for i := range ps {
		ps[i] = &cachedReader{base: base, stream: stream, token: token, scope: scope}
		wg.Go(func() {
			c, interval := cursor, ""
			for lctx.Err() == nil {
				q := url.Values{"cursor": {c}, "wait": {"10s"}}
				if interval != "" {
					q.Set("interval", interval)
				}
				evs, next, h, _, err := ps[i].page(lctx, q)
				if err != nil {
					if lctx.Err() == nil {
						t.Errorf("poller %d: %v", i, err)
					}
					return
				}
				mu.Lock()
				got[i] = append(got[i], evs...)
				mu.Unlock()
				c, interval = next, h.Get("Vsg-Interval")
			}
		})
	}
	// Paced, a row every 50 ms: several pages of the live end, each
	// lingering 200 ms for the rows after its first.
	tick := time.NewTicker(50 * time.Millisecond)
	for range rows {
		<-tick.C
		if err := w.insert(ctx, "live", 1); err != nil {
			t.Fatal(err)
		}
	}
	tick.Stop()
	want := w.since(from)
	eventually(t, 30*time.Second, "every poller has every live row", func() error {
		mu.Lock()
		defer mu.Unlock()
		for i := range got {
			if n := countRows(got[i], want); n < len(want) {
				return fmt.Errorf("poller %d has %d of %d rows", i, n, len(want))
			}
		}
		return nil
	})
	stop()
	wg.Wait()
	distinct, asked := map[string]bool{}, 0
	for i := range ps {
		checkExactlyOnce(t, fmt.Sprintf("live poller %d through the cache", i), got[i], want)
		for _, u := range ps[i].urls {
			distinct[u] = true
		}
		asked += len(ps[i].urls)
	}
	reached := changesRequests(t, g) - before
	t.Logf("live: %d pollers asked %d times for %d URLs; %v requests reached the gateway", pollers, asked, len(distinct), reached)
	if reached > float64(len(distinct)) {
		t.Errorf("%v requests reached the gateway for %d live URLs: a URL left the cache twice", reached, len(distinct))
	}
}

// countRows counts the events of got that are rows of want.
func countRows(got []ev, want []string) int {
	in := map[string]bool{}
	for _, e := range want {
		in[e] = true
	}
	n := 0
	for _, e := range got {
		if in[e.str("email")] {
			n++
		}
	}
	return n
}

// A cursor that cannot be resumed, asked through the cache by many
// readers at once: one 409 resume_impossible leaves the gateway, kept by
// the cache for the others, naming a restart URL; following it gets the
// rows of a fresh snapshot, not another 409 (DESIGN §6.2 rule 7). The
// cursor is on shards the customer keyspace does not have (as after a
// reshard whose journal nobody saw) of an on_gap fail stream.
func TestPullConflictBehindCache(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret := "cache-conflict-test-cursor-secret"
	g := startGateway(t, append(withDataDir(t), "--pull-cache", "--cursor-secret", secret)...)
	proxy := startVarnish(t, g.url, 50)
	stream := "cdn409-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}, "on_gap": "fail"})
	codec, err := cursor.NewCodec([]byte(secret), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Tokens are bound to the stream and the keyspace it started in.
	gone, err := codec.Encode(ctx, stream+"\x00customer", &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{
		{Keyspace: "customer", Shard: "-80", Gtid: "MariaDB/0-1-5"}, {Keyspace: "customer", Shard: "80-", Gtid: "MariaDB/0-1-5"}}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string) (int, http.Header, []byte) {
		req, _ := http.NewRequestWithContext(ctx, "GET", proxy.url+u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	before := changesRequests(t, g)
	const readers = 10
	restarts := make([]string, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			st, h, b := get("/v1/streams/" + stream + "/changes?limit=100&cursor=" + url.QueryEscape(gone))
			var e struct {
				Error struct{ Code, Restart string } `json:"error"`
			}
			json.Unmarshal(b, &e)
			if st != http.StatusConflict || e.Error.Code != "resume_impossible" || e.Error.Restart == "" || h.Get("Vsg-Restart") != e.Error.Restart {
				t.Errorf("reader %d: %d %v %s", i, st, h, b)
			}
			restarts[i] = e.Error.Restart
		})
	}
	wg.Wait()
	if n := changesRequests(t, g) - before; n != 1 {
		t.Errorf("%d readers of a cursor that cannot be resumed: %v requests reached the gateway, want 1", readers, n)
	}
	for i, r := range restarts {
		if r != restarts[0] {
			t.Errorf("reader %d was sent to restart at %s, reader 0 at %s", i, r, restarts[0])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Following the restart: the first page of a fresh snapshot.
	st, h, b := get(restarts[0])
	var p struct {
		Events []json.RawMessage `json:"events"`
	}
	json.Unmarshal(b, &p)
	if st != 200 || len(p.Events) == 0 || h.Get("Vsg-Next-Cursor") == "" {
		t.Fatalf("following %s: %d %s", restarts[0], st, b)
	}
	if e, err := parseEvent(p.Events[0]); err != nil || e.Op != "snapshot" {
		t.Errorf("the restart's first event is not a snapshot row: %s", p.Events[0])
	}
	// And its cursor reads on.
	q, _ := url.ParseQuery(restarts[0][strings.IndexByte(restarts[0], '?')+1:])
	q.Del("start")
	q.Set("cursor", h.Get("Vsg-Next-Cursor"))
	if st, _, b := get("/v1/streams/" + stream + "/changes?" + q.Encode()); st != 200 {
		t.Errorf("the page after the restart's first: %d %s", st, b)
	}
}
