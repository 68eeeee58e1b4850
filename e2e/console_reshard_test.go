package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// TestConsoleReshard drives the console across a real reshard of customer
// (0 -> -80,80-, then back to 0 so that later tests find the keyspace as
// they expect it):
//   - one tab keeps the stream page open while rows are written before,
//     during and after the reshard: its live table shows every row once,
//     in order per shard;
//   - a named subscriber away since before the cutover has more backlog
//     than the gateway may spool (--bridge-spool-events 10), so its bridge
//     fails: the reshards view, in a second tab, shows the journal with that
//     failed bridge, the subscriber pinning the old shards and "Not safe to
//     complete";
//   - the subscriber comes back, reads across the cutover itself and acks:
//     the verdict flips to "Safe to complete" without a reload, and
//     `Reshard complete` runs.
//
// About a minute: two reshards on the real cluster.
func TestConsoleReshard(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	// A store of its own: safe_to_complete counts every named subscriber
	// the store knows, and other tests leave theirs in the shared Redis.
	g := startGateway(t, append(withDataDir(t), "--bridge-spool-events", "10")...)
	run := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream := "conrs-" + run
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	w := newWriter(t, "conrs"+run)

	// The subscriber that will be away across the cutover.
	pinned := &offline{name: "pinned", stream: stream, sub: "pinned-" + run}
	pinned.cursor = initialCursor(t, ctx, g, stream)
	if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+pinned.sub+"/ack", map[string]string{"cursor": pinned.cursor}, nil); err != nil || st != 200 {
		t.Fatalf("ack as %s: %d %v", pinned.sub, st, err)
	}

	// Tab 1: the stream page, live.
	d := openDashboard(t, ctx, chromium, stream, w.tag)
	navigate(t, d, g.url+"/?"+url.Values{"stream": {stream}}.Encode())
	d.waitFor("connected with a cursor", 30*time.Second, func(s *dashSnapshot) bool {
		return strings.HasPrefix(s.State, "connected") && s.Saved != ""
	})
	// Backlog for the away subscriber: more than the spool may hold.
	if err := w.insert(ctx, "before", 40); err != nil {
		t.Fatal(err)
	}

	// Tab 2: the reshards view.
	r := newTab(t, d)
	if err := chromedp.Do(r.ctx, chromedp.EmulateViewport(1400, 900)); err != nil {
		t.Fatal(err)
	}
	navigate(t, r, g.url+"/?view=reshards")
	waitJS(t, r, "the reshards view", 30*time.Second, `!document.getElementById('view-reshards').hidden`)

	// Rows go on being written while the keyspace is resharded and switched.
	during, stopDuring := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for during.Err() == nil {
			if err := w.insert(ctx, "during", 1); err != nil {
				t.Logf("write during the reshard failed: %v", err)
				w.recoverAmbiguous(ctx, t, err)
				wait.Sleep(during, 100*time.Millisecond) // pacing: writes fail for a moment around the switch
				continue
			}
			wait.Sleep(during, 50*time.Millisecond) // pacing: a trickle, well under the 500 rows the page shows
		}
	}()
	stopWriter := sync.OnceFunc(func() { stopDuring(); wg.Wait() })
	t.Cleanup(stopWriter)
	if err := cluster.AddShards(ctx, "customer", []string{"-80", "80-"}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Reshard(ctx, "customer", "consplit", "0", "-80,80-"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.SwitchTraffic(ctx, "customer", "consplit"); err != nil {
		t.Fatal(err)
	}
	switchedAt := time.Now()
	if err := w.insert(ctx, "switched", 5); err != nil {
		t.Fatal(err)
	}
	stopWriter()

	// The journal in the timeline: the failed bridge, the subscriber that
	// pins the old shard, and the verdict.
	item := `[...document.querySelectorAll('#reshard-list li.reshard')].find((li) => /0 → -80, 80-/.test(li.querySelector('h2').textContent))`
	waitJS(t, r, "the reshard in the timeline, not safe to complete, with the failed bridge and the pinning subscriber", 2*time.Minute,
		item+` && `+item+`.querySelector('.verdict').dataset.safe === 'false'`+
			fmt.Sprintf(` && `+item+`.querySelector('.bridges tr[data-subscriber=%q][data-state=failed]')`, pinned.sub)+
			fmt.Sprintf(` && /spool/.test(`+item+`.querySelector('.bridges tr[data-subscriber=%q]').textContent)`, pinned.sub)+
			fmt.Sprintf(` && `+item+`.querySelector('.blocking li[data-subscriber=%q]')`, pinned.sub))
	t.Logf("timeline shows the reshard, not safe, %v after the switch", time.Since(switchedAt).Round(time.Millisecond))
	screenshot(t, r, "reshards.png")

	// The subscriber comes back and reads across the cutover itself.
	comeBack(t, ctx, g, w, pinned)
	backAt := time.Now()
	waitJS(t, r, "the verdict flipped to safe to complete", time.Minute,
		item+` && `+item+`.querySelector('.verdict').dataset.safe === 'true' && `+item+`.querySelector('.verdict').textContent === 'Safe to complete'`+
			` && `+item+`.querySelectorAll('.blocking li').length === 0`)
	t.Logf("verdict safe %v after the subscriber acked across the cutover", time.Since(backAt).Round(time.Millisecond))
	for _, rs := range getReshards(t, ctx, g).Reshards {
		if strings.Join(rs.From, ",") == "0" && strings.Join(rs.To, ",") == "-80,80-" && !rs.Safe {
			t.Errorf("the page says safe, the API does not: %+v", rs)
		}
	}
	if err := cluster.Complete(ctx, "customer", "consplit"); err != nil {
		t.Fatal(err)
	}

	// The live table across the reshard: every row, once.
	if err := w.insert(ctx, "completed", 5); err != nil {
		t.Fatal(err)
	}
	d.waitSeen("every row across the reshard", w.since(0))
	d.check("live table across the reshard", w.since(0))
	t.Logf("live table: %d rows across the reshard, each once", len(w.since(0)))

	// Back to one shard for the tests that follow.
	reshardStep(t, ctx, "conmerge", "-80,80-", "0")
}

// newTab opens another tab in d's browser.
func newTab(t *testing.T, d *dashboard) *dashboard {
	t.Helper()
	ctx, cancel := chromedp.NewContext(d.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	return &dashboard{t: t, ctx: ctx, stream: d.stream, tag: d.tag}
}
