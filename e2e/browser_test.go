package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestDashboard drives the dashboard (web/static) in headless Chromium, once
// per transport, on a gateway with authentication on (the token travels in
// the page URL, as `make demo` prints it). A fresh page shows every row
// inserted, once and in order; a reload in the middle of a stream of inserts
// and a visit elsewhere while rows are inserted both resume from the cursor
// the page saved: taken together, the tables the user saw hold every row
// exactly once, in commit order per shard.
func TestDashboard(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	g := startAuthGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	admin := g.token(t, "ops", []string{"*"}, []string{"*"}, "admin")
	for _, transport := range []string{"sse", "ws"} {
		stream := "dash-" + transport + "-" + run
		body := `{"name":"` + stream + `","keyspace":"customer","tables":["customer"]}`
		if st, b, err := g.call(ctx, "POST", "/v1/streams", admin, body, nil); err != nil || st != 201 {
			t.Fatalf("create stream %s: %d %s %v", stream, st, b, err)
		}
		// One transport at a time (and no other test writes meanwhile): a
		// page then shows only its own writer's rows, so the newest row when
		// the page is left, the one most at risk of coming again, is always
		// one the test checks.
		t.Run(transport, func(t *testing.T) {
			viewer := g.token(t, "viewer", []string{stream}, []string{"customer.customer"}, "")
			q := url.Values{"stream": {stream}, "transport": {transport}, "access_token": {viewer}}
			d := openDashboard(t, ctx, chromium, stream, "dash"+run+"-"+transport)
			testDashboard(t, d, g.url+"/?"+q.Encode())
		})
	}
}

func testDashboard(t *testing.T, d *dashboard, pageURL string) {
	w := newWriter(t, d.tag)
	ctx := d.ctx

	// A fresh page has no cursor: the stream starts "now", which is a real
	// position only once the gateway has one (its first heartbeat, saved by
	// the page). Rows inserted before that could fall before "now".
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	d.waitFor("connected with a cursor", 20*time.Second, func(s *dashSnapshot) bool {
		return strings.HasPrefix(s.State, "connected") && s.Saved != ""
	})
	first := d.last.Doc

	// Live rows.
	if err := w.insert(ctx, "a", 30); err != nil {
		t.Fatal(err)
	}
	d.waitSeen("phase a", w.since(0))
	d.check("phase a", w.since(0))

	// Reload while rows are being inserted: the reload cuts the stream
	// mid-way, and rows go on being inserted while the old page is gone and
	// the new one connects. The writer stops once the new page is connected
	// (at most 100 rows, well below the 500 rows a page shows).
	stop, written := make(chan struct{}), make(chan struct{})
	var writeErr error
	go func() {
		defer close(written)
		for i := 0; i < 100; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if writeErr = w.insert(ctx, "b", 1); writeErr != nil {
				return
			}
		}
	}()
	stopWriter := sync.OnceFunc(func() { close(stop); <-written })
	t.Cleanup(stopWriter) // on failure too, before the writer's database closes
	d.waitFor("the first row of phase b", 20*time.Second, func(s *dashSnapshot) bool {
		for _, r := range s.seen(d.tag) {
			if strings.HasPrefix(r.Email, d.tag+"-b-") {
				return true
			}
		}
		return false
	})
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	d.waitFor("reconnected after the reload", 20*time.Second, func(s *dashSnapshot) bool {
		return s.Doc != first && strings.HasPrefix(s.State, "connected")
	})
	connectedAt := len(w.since(0))
	stopWriter()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	// Rows after the reload, so that the new page is seen to carry on live.
	if err := w.insert(ctx, "b-live", 5); err != nil {
		t.Fatal(err)
	}
	s := d.waitSeen("phase b (reload)", w.since(0))
	reloaded := s.Doc
	before, after := s.Left[first], s.Rows
	d.check("phase b (reload)", w.since(0))
	d.notShownAgain("after the reload", before, after)
	gap := connectedAt - len(tagged(before, d.tag))
	t.Logf("reload: %d rows shown before it, %d after; %d inserted between the old page's last row and the new page seen connected",
		len(tagged(before, d.tag)), len(tagged(after, d.tag)), gap)

	// Away: rows inserted while no page is open arrive when it is back.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if err := w.insert(ctx, "c", 30); err != nil {
		t.Fatal(err)
	}
	// Back as the browser's back button does: the page may come from the
	// back/forward cache (same document, no load event) or load anew.
	hist, err := chromedp.Call(ctx, page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if hist.CurrentIndex < 1 {
		t.Fatalf("no history to go back to: %+v", hist)
	}
	if _, err := chromedp.Call(ctx, page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: hist.Entries[hist.CurrentIndex-1].ID}); err != nil {
		t.Fatal(err)
	}
	d.waitSeen("phase c (away and back)", w.since(0))
	// And the page carries on live.
	if err := w.insert(ctx, "c-live", 5); err != nil {
		t.Fatal(err)
	}
	s = d.waitSeen("phase c (live after coming back)", w.since(0))
	how := "loaded anew"
	if s.Doc == reloaded {
		how = "restored from the back/forward cache"
	}
	d.check("phase c (away and back)", w.since(0))
	if s.Doc != reloaded {
		d.notShownAgain("after coming back", s.Left[reloaded], s.Rows)
	}
	t.Logf("back: page %s; %d rows in all, %d shown by the last page", how, len(w.since(0)), len(tagged(s.Rows, d.tag)))
}

// findChromium fails the test when Chromium is missing: with VSG_E2E=1 the
// dashboard is part of what is tested.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the dashboard test needs headless Chromium: install the Debian package chromium (.ci/run does)")
	return ""
}

// dashboard is one browser tab on the dashboard.
type dashboard struct {
	t      *testing.T
	ctx    context.Context
	stream string
	tag    string // this test's rows have emails starting with tag + "-"
	last   *dashSnapshot

	mu  sync.Mutex
	log []string // the page's console output and exceptions, for failures
}

// dashProbe runs in every document before app.js. It names the document
// and, on pagehide, records the table as it was when the user left it. Its
// listener comes before the page's own, so it sees the table before the
// page drops anything on its way out: a row shown then must not come again.
const dashProbe = `(() => {
  if (location.protocol !== 'http:') return;
  const id = Date.now().toString(36) + Math.random().toString(36).slice(2);
  const docs = JSON.parse(sessionStorage.getItem('vsg.e2e.docs') || '[]');
  sessionStorage.setItem('vsg.e2e.docs', JSON.stringify(docs.concat(id)));
  const rows = () => Array.from(document.querySelectorAll('#changes tbody tr:not(.ctl)'), (tr) => {
    let email = '';
    for (const c of tr.cells[5].querySelectorAll('.col')) {
      if (c.firstChild.textContent === 'email: ') email = c.lastChild.textContent;
    }
    return { email, op: tr.cells[1].textContent, shard: tr.cells[3].textContent };
  }).reverse(); // newest first on screen
  window.vsgE2E = { id, rows };
  addEventListener('pagehide', () => {
    const left = JSON.parse(sessionStorage.getItem('vsg.e2e.left') || '{}');
    left[id] = rows();
    sessionStorage.setItem('vsg.e2e.left', JSON.stringify(left));
  });
})();`

// dashSnapshot is what the tab shows at one moment.
type dashSnapshot struct {
	Doc     string               `json:"doc"`  // the current document
	Docs    []string             `json:"docs"` // every document of the tab, in order
	Left    map[string][]dashRow `json:"left"` // each document's rows when it was left
	Rows    []dashRow            `json:"rows"` // the current table, oldest first
	State   string               `json:"state"`
	Saved   string               `json:"saved"` // the cursor in localStorage
	Notices []string             `json:"notices"`
}

type dashRow struct {
	Email string `json:"email"`
	Op    string `json:"op"`
	Shard string `json:"shard"`
}

func openDashboard(t *testing.T, ctx context.Context, chromium, stream, tag string) *dashboard {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		// Close the browser gracefully, then make sure its process is gone.
		cctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		chromedp.Cancel(cctx)
		cancelBrowser()
		cancelAlloc()
	})
	d := &dashboard{t: t, ctx: bctx, stream: stream, tag: tag}
	if err := chromedp.Listen(bctx, d.record); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: dashProbe}); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *dashboard) record(ev any) {
	var line string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		var args []string
		for _, a := range ev.Args {
			args = append(args, strings.Trim(string(a.Value), `"`))
		}
		line = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *runtime.EventExceptionThrown:
		line = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			line += " " + ev.ExceptionDetails.Exception.Description
		}
	default:
		return
	}
	d.mu.Lock()
	d.log = append(d.log, line)
	d.mu.Unlock()
}

func (d *dashboard) snapshot(ctx context.Context) (*dashSnapshot, error) {
	key, _ := json.Marshal("vsg.cursor." + d.stream)
	return chromedp.Run(ctx, chromedp.Evaluate[*dashSnapshot](`(() => {
  const e = window.vsgE2E;
  if (!e || document.readyState === 'loading') return null;
  return {
    doc: e.id,
    docs: JSON.parse(sessionStorage.getItem('vsg.e2e.docs') || '[]'),
    left: JSON.parse(sessionStorage.getItem('vsg.e2e.left') || '{}'),
    rows: e.rows(),
    state: document.getElementById('state').textContent,
    saved: localStorage.getItem(`+string(key)+`) || '',
    notices: Array.from(document.querySelectorAll('#notices .notice span'), (s) => s.title),
  };
})()`))
}

// waitFor polls the tab until ok holds; the page may be between documents
// meanwhile (no snapshot, or an evaluation error).
func (d *dashboard) waitFor(what string, timeout time.Duration, ok func(*dashSnapshot) bool) *dashSnapshot {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	defer cancel()
	var got *dashSnapshot
	var lastErr error
	err := eventuallyCtx(ctx, 0, what, func() error {
		s, err := d.snapshot(ctx)
		switch {
		case err != nil:
			lastErr = err
			return err
		case s == nil:
			return errors.New("no snapshot: the page is between documents")
		}
		d.last = s
		if !ok(s) {
			return errors.New("not yet")
		}
		got = s
		return nil
	})
	if err != nil {
		d.t.Fatalf("%s: not within %v: %s (last evaluation error: %v)", what, timeout, d.describe(d.last), lastErr)
	}
	return got
}

// waitSeen waits until every row of want has been seen.
func (d *dashboard) waitSeen(what string, want []string) *dashSnapshot {
	d.t.Helper()
	return d.waitFor(what, 30*time.Second, func(s *dashSnapshot) bool {
		seen := map[string]bool{}
		for _, r := range s.seen(d.tag) {
			seen[r.Email] = true
		}
		for _, e := range want {
			if !seen[e] {
				return false
			}
		}
		return true
	})
}

// check asserts that the rows seen so far are exactly want: each once,
// inserts, in insertion order per shard.
func (d *dashboard) check(what string, want []string) {
	d.t.Helper()
	seen := d.last.seen(d.tag)
	got := make([]ev, 0, len(seen))
	for _, r := range seen {
		if r.Op != "insert" {
			d.t.Errorf("%s: row %s shown as %q, want insert", what, r.Email, r.Op)
		}
		email, _ := json.Marshal(r.Email)
		got = append(got, ev{Type: "change", Op: r.Op, Shard: r.Shard, After: map[string]json.RawMessage{"email": email}})
	}
	checkExactlyOnce(d.t, what, got, want)
	if d.t.Failed() {
		d.t.Fatalf("%s: %s", what, d.describe(d.last))
	}
}

// notShownAgain names the rows a new document shows that the previous one
// already showed when it was left.
func (d *dashboard) notShownAgain(what string, before, after []dashRow) {
	d.t.Helper()
	shown := map[string]bool{}
	for _, r := range tagged(before, d.tag) {
		shown[r.Email] = true
	}
	for _, r := range tagged(after, d.tag) {
		if shown[r.Email] {
			d.t.Errorf("%s: row %s was shown before and again", what, r.Email)
		}
	}
}

// seen returns this test's rows that the user saw, in order: each earlier
// document's table as it was left, then the current table. A document
// restored from the back/forward cache is the current one again, with the
// rows it kept.
func (s *dashSnapshot) seen(tag string) []dashRow {
	var all []dashRow
	for _, doc := range s.Docs {
		if doc == s.Doc {
			all = append(all, s.Rows...)
		} else {
			all = append(all, s.Left[doc]...)
		}
	}
	return tagged(all, tag)
}

func tagged(rows []dashRow, tag string) []dashRow {
	var out []dashRow
	for _, r := range rows {
		if strings.HasPrefix(r.Email, tag+"-") {
			out = append(out, r)
		}
	}
	return out
}

func (d *dashboard) describe(s *dashSnapshot) string {
	var b strings.Builder
	if s == nil {
		b.WriteString("no dashboard page")
	} else {
		fmt.Fprintf(&b, "state %q, saved cursor %q, %d documents", s.State, s.Saved, len(s.Docs))
		var rows []string
		for _, r := range s.seen(d.tag) {
			rows = append(rows, strings.TrimPrefix(strings.TrimSuffix(r.Email, "@e2e"), d.tag+"-")+"/"+r.Shard)
		}
		fmt.Fprintf(&b, "; rows seen: %v", rows)
		if len(s.Notices) > 0 {
			fmt.Fprintf(&b, "; notices: %q", s.Notices)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.log) > 0 {
		fmt.Fprintf(&b, "; page log: %q", d.log)
	}
	return b.String()
}
