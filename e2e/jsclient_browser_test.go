package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// jsBrowserPage loads the client's browser build (dist/vsg-client.min.js,
// as published) from another origin than the gateway's, as an application
// would, and reads a stream with one client per transport. Each keeps the
// emails of its rows, per transaction, in window.seen.
const jsBrowserPage = `<!doctype html><meta charset="utf-8"><title>client</title>
<script type="module">
import { StreamClient, sessionStorageStore } from './vsg-client.min.js';
window.seen = {};
window.errors = [];
window.start = (cfg) => {
  for (const [name, extra] of Object.entries({ ws: {}, sse: {}, eventsource: { transport: 'sse', EventSource }, poll: { pollWait: '5s' } })) {
    const c = new StreamClient({ url: cfg.url, stream: cfg.stream, cursor: cfg.cursor, transport: name,
      getToken: async () => cfg.token, cursorStore: sessionStorageStore(), storeKey: name, ...extra });
    window.seen[name] = [];
    c.subscribe((txn) => {
      const rows = txn.changes.map((e) => e.after.email).filter((m) => m.includes(cfg.mark));
      if (rows.length) window.seen[name].push(rows);
    }).catch((e) => window.errors.push(name + ': ' + e.message));
  }
  return true;
};
</script>`

// testJSBrowser reads rows written in transactions of three through every
// transport of the minified build in headless Chromium: each transaction
// once, whole and in order. The EventSource transport carries the token as
// access_token, the others as a header or WebSocket subprotocol.
func testJSBrowser(t *testing.T, ctx context.Context, c *jsControl) {
	chromium := findChromium(t)
	bundle := filepath.Join(jsDir, "dist", "vsg-client.min.js")
	if _, err := os.Stat(bundle); err != nil {
		t.Fatal("the client's browser build is missing: run make test-deps (npm run build in clients/js)")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, jsBrowserPage)
	})
	mux.HandleFunc("GET /vsg-client.min.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, bundle) })
	site := httptest.NewServer(mux)
	defer site.Close()

	tok, err := c.token(time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := c.token(time.Hour, "admin")
	stream := fmt.Sprintf("js-browser-%d", time.Now().UnixNano()%1e9)
	if st, b, err := c.g.call(ctx, "POST", "/v1/streams", admin, `{"name":"`+stream+`","keyspace":"customer","tables":["customer"]}`, nil); err != nil || st != 201 {
		t.Fatalf("create stream: %d %s %v", st, b, err)
	}
	cursor := liveCursorOf(t, ctx, c, stream, tok)

	d := openDashboard(t, ctx, chromium, stream, "browser")
	phase := fmt.Sprintf("browser%d", time.Now().UnixNano()%1e6)
	cfg, _ := json.Marshal(map[string]string{"url": c.g.url, "stream": stream, "cursor": cursor, "token": tok, "mark": "-" + phase + "-"})
	if err := chromedp.Do(d.ctx, chromedp.Navigate(site.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, d, "the page's module loaded", 20*time.Second, `typeof window.start === 'function'`)
	if ok, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](`window.start(`+string(cfg)+`)`)); err != nil || !ok {
		t.Fatalf("start the clients: %v; page log: %v", err, d.log)
	}
	for range 10 {
		if err := c.insert(ctx, phase, 3, 3); err != nil {
			t.Fatal(err)
		}
	}
	want := c.rows(phase)
	waitJS(t, d, "every transport has every row", 60*time.Second,
		`['ws','sse','eventsource','poll'].every((k) => window.seen[k].flat().length >= `+fmt.Sprint(len(want))+`) || window.errors.length`)
	seen, err := chromedp.Run(d.ctx, chromedp.Evaluate[map[string][][]string](`window.seen`))
	if err != nil {
		t.Fatal(err)
	}
	errs, err := chromedp.Run(d.ctx, chromedp.Evaluate[[]string](`window.errors`))
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatalf("client errors in the page: %v", errs)
	}
	for name, txns := range seen {
		var rows []string
		for _, txn := range txns {
			if len(txn) != 3 {
				t.Errorf("%s: a transaction of %d rows, want 3 (whole): %v", name, len(txn), txn)
			}
			rows = append(rows, txn...)
		}
		if !slices.Equal(rows, want) {
			t.Errorf("%s: rows %v, want %v", name, rows, want)
		}
	}
	t.Logf("browser build: %d transactions of 3 rows through ws, sse, eventsource and poll", len(want)/3)
}

// liveCursorOf asks the gateway for the stream's position now.
func liveCursorOf(t *testing.T, ctx context.Context, c *jsControl, stream, tok string) string {
	t.Helper()
	var cursor string
	eventually(t, 20*time.Second, "a cursor for "+stream, func() error {
		st, b, err := c.g.call(ctx, "GET", "/v1/streams/"+stream+"/changes", tok, "", nil)
		if err != nil || st != 200 {
			return fmt.Errorf("%d %s %v", st, b, err)
		}
		var page struct {
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil || page.NextCursor == "" {
			return fmt.Errorf("no next_cursor in %s", b)
		}
		cursor = page.NextCursor
		return nil
	})
	return cursor
}
