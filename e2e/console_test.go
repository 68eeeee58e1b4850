package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// consoleSeedRows is how many rows the snapshot stream's table gets before
// the stream page opens: enough that a page reading the snapshot first
// (the bug) shows snapshot rows before the live one.
const consoleSeedRows = 10_000

// TestConsole drives the operator's console (web/static) in headless
// Chromium against the real cluster:
//   - the stream page is live first: on a start: snapshot stream over a table
//     of thousands of rows, a row inserted after the page opened shows in
//     the live table within seconds and no snapshot row comes before it;
//     the current rows load beside it in pages;
//   - a named subscriber shows its stored cursor per shard and lag, and is
//     deleted from the page (a confirmed admin action);
//   - the overview shows the stream with its charts.
//
// With VSG_SCREENSHOTS=<dir> it saves a screenshot of each view there
// (`make screenshots` writes the README's, docs/console/).
func TestConsole(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	g := startGateway(t, withDataDir(t)...)
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	stream := "console-" + run
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}, "start": "snapshot"})
	seedRows(t, ctx, "con"+run+"-seed", consoleSeedRows)

	d := openDashboard(t, ctx, chromium, stream, "con"+run)
	if err := chromedp.Do(d.ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, d.tag)

	// Live first.
	navigate(t, d, g.url+"/?"+url.Values{"stream": {stream}}.Encode())
	d.waitFor("connected with a cursor", 30*time.Second, func(s *dashSnapshot) bool {
		return strings.HasPrefix(s.State, "connected") && s.Saved != ""
	})
	insertedAt := time.Now()
	if err := w.insert(ctx, "live", 1); err != nil {
		t.Fatal(err)
	}
	s := d.waitSeen("the live row", w.since(0))
	shownAfter := time.Since(insertedAt)
	d.check("live", w.since(0))
	if n := len(s.Rows); n != 1 || s.Rows[0].Op != "insert" {
		t.Fatalf("the live table shows %d rows (%+v): want only the live insert, no snapshot row before it", n, s.Rows)
	}
	t.Logf("live row shown %v after its insert, on a snapshot stream over a table of ≥ %d rows", shownAfter.Round(time.Millisecond), consoleSeedRows)

	// The current rows, beside it, in pages.
	click(t, d, "#current-load")
	waitJS(t, d, "the first page of current rows", 60*time.Second,
		`document.querySelectorAll('#current-rows tbody tr').length === 200 && /200 rows read in 1 page/.test(document.getElementById('current-state').textContent)`)
	click(t, d, "#current-load")
	waitJS(t, d, "the second page of current rows", 60*time.Second, `/400 rows read in 2 pages/.test(document.getElementById('current-state').textContent)`)

	// A named subscriber: decoded cursor and lag, then deleted from the page.
	sub := "billing-" + run
	var pulled struct {
		NextCursor string `json:"next_cursor"`
	}
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes?start=now&limit=10&subscriber="+sub, nil, &pulled); err != nil || st != 200 {
		t.Fatalf("pull as %s: %d %v", sub, st, err)
	}
	if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+sub+"/ack", map[string]string{"cursor": pulled.NextCursor}, nil); err != nil || st != 200 {
		t.Fatalf("ack as %s: %d %v", sub, st, err)
	}
	if err := w.insert(ctx, "behind", 3); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`document.querySelector('#subscriber-list tr[data-subscriber=%q]')`, sub)
	waitJS(t, d, "the subscriber with its positions and lag", 30*time.Second,
		row+` && /MariaDB/.test(`+row+`.cells[2].title + `+row+`.cells[2].innerHTML) && /[1-9][0-9]* txns/.test(`+row+`.cells[3].textContent)`)
	screenshot(t, d, "stream.png")
	click(t, d, fmt.Sprintf(`#subscriber-list tr[data-subscriber=%q] button.act`, sub))
	click(t, d, fmt.Sprintf(`#subscriber-list tr[data-subscriber=%q] button.confirm`, sub))
	waitJS(t, d, "the subscriber gone from the page", 30*time.Second, `!`+row)
	if st, _ := g.do(ctx, "GET", "/v1/streams/"+stream+"/subscribers/"+sub, nil, nil); st != http.StatusNotFound {
		t.Fatalf("after deleting %s from the page, GET answers %d, want 404", sub, st)
	}

	// The overview, with charts.
	navigate(t, d, g.url+"/?view=overview")
	card := fmt.Sprintf(`document.querySelector('#overview-streams [data-stream=%q]')`, stream)
	waitJS(t, d, "the stream's card with its charts and tail", 30*time.Second,
		card+` && `+card+`.querySelectorAll('.uplot').length === 2 && `+card+`.querySelector('.tail .pos') !== null`)
	screenshot(t, d, "overview.png")

	navigate(t, d, g.url+"/?view=reshards")
	waitJS(t, d, "the reshards view", 30*time.Second, `!document.getElementById('view-reshards').hidden && document.getElementById('reshards-error').textContent === ''`)
}

// TestConsoleScopes: a token without admin sees no admin view or action
// (and the API refuses them anyway); an admin token sees them. The token
// given in the page URL is moved to sessionStorage and out of the address
// bar.
func TestConsoleScopes(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	g := startAuthGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	stream := "console-scope-" + run
	admin := g.token(t, "ops", []string{"*"}, []string{"*"}, "admin")
	if st, b, err := g.call(ctx, "POST", "/v1/streams", admin, `{"name":"`+stream+`","keyspace":"customer","tables":["customer"]}`, nil); err != nil || st != 201 {
		t.Fatalf("create stream: %d %s %v", st, b, err)
	}
	viewer := g.token(t, "viewer", []string{stream}, []string{"customer.customer"}, "")
	if st, _, _ := g.call(ctx, "GET", "/v1/streams/"+stream+"/subscribers", viewer, "", nil); st != http.StatusForbidden {
		t.Fatalf("viewer GET …/subscribers: %d, want 403", st)
	}
	d := openDashboard(t, ctx, chromium, stream, "scope"+run)
	adminUI := `[...document.querySelectorAll('#nav a[data-admin], #subscribers')].filter((n) => !n.hidden && n.offsetParent !== null).length`

	navigate(t, d, g.url+"/?"+url.Values{"stream": {stream}, "access_token": {viewer}}.Encode())
	waitJS(t, d, "the viewer's stream page, connected", 30*time.Second,
		`/^connected/.test(document.getElementById('state').textContent) && document.body.dataset.ready !== 'x'`)
	waitJS(t, d, "the token out of the address bar and in sessionStorage", 10*time.Second,
		fmt.Sprintf(`!location.search.includes('access_token') && sessionStorage.getItem('vsg.token') === %q`, viewer))
	waitJS(t, d, "no admin view or action for the viewer", 10*time.Second, adminUI+` === 0 && document.querySelectorAll('button.act').length === 0`)
	navigate(t, d, g.url+"/?view=webhooks")
	waitJS(t, d, "the webhooks view refused to the viewer (overview instead)", 10*time.Second,
		`document.getElementById('view-webhooks').hidden && !document.getElementById('view-overview').hidden`)

	// The same tab signs in as admin: the admin views appear.
	waitJS(t, d, "the sign-in form", 10*time.Second, `document.getElementById('token') !== null`)
	if _, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { document.getElementById('token').value = %q; document.getElementById('login').requestSubmit(); return true; })()`, admin))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, d, "the admin views", 30*time.Second, `document.body.classList.contains('is-admin') && !document.querySelector('#nav a[data-view=webhooks]').hidden`)
	navigate(t, d, g.url+"/?"+url.Values{"stream": {stream}}.Encode())
	waitJS(t, d, "the subscribers panel for the admin", 30*time.Second, `!document.getElementById('subscribers').hidden`)
}

// seedRows inserts n rows tagged tag in multi-row statements.
func seedRows(t *testing.T, ctx context.Context, tag string, n int) {
	t.Helper()
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < n; {
		var b strings.Builder
		b.WriteString("insert into customer(email) values ")
		for j := 0; j < 500 && i < n; j, i = j+1, i+1 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "('%s-%06d@e2e')", tag, i)
		}
		if _, err := db.ExecContext(ctx, b.String()); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

func navigate(t *testing.T, d *dashboard, u string) {
	t.Helper()
	if err := chromedp.Do(d.ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
}

func click(t *testing.T, d *dashboard, sel string) {
	t.Helper()
	waitJS(t, d, "a button to click: "+sel, 30*time.Second, fmt.Sprintf(`document.querySelector(%q) && !document.querySelector(%q).disabled`, sel, sel))
	if _, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { document.querySelector(%q).click(); return true; })()`, sel))); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

// waitJS waits until the JavaScript expression cond is true in the page.
func waitJS(t *testing.T, d *dashboard, what string, timeout time.Duration, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	defer cancel()
	err := eventuallyCtx(ctx, 0, what, func() error {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { try { return !!(`+cond+`); } catch { return false; } })()`))
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil {
		text, _ := chromedp.Run(d.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		t.Fatalf("%s: not within %v: %v\npage: %s\n%s", what, timeout, err, text, d.describe(nil))
	}
}

// screenshot saves what the window shows (PNG) to $VSG_SCREENSHOTS/name
// when set.
func screenshot(t *testing.T, d *dashboard, name string) {
	t.Helper()
	dir := os.Getenv("VSG_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(d.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
