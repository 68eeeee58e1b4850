package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleWebhooks drives the console's webhooks view in headless
// Chromium against the real cluster, two webhooks on receivers that fail
// (503) until the test fixes them:
//   - "stuck" (1000 attempts) shows its pending batch with the attempt
//     count, the receiver's answer and the next retry, its failure chart,
//     and the stream's batches in flight on the overview;
//   - "dead" (3 attempts) shows its dead letter with its attempts and last
//     error;
//   - Pause and Resume clicked on the page pause and resume the webhook
//     (checked through the API); once the receiver is fixed the stuck
//     batch is delivered and the latency chart draws it;
//   - replaying the dead letter from the page delivers it;
//   - Rotate shows the new secret and the API reports the old one expiring;
//   - Purge empties the dead letters (checked through the API).
func TestConsoleWebhooks(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := startGateway(t, whGatewayFlags(t, "--webhook-retry-min", "300ms")...)
	stream := newCustomerStream(t, g, "conwh")
	var mu sync.Mutex
	failing := true
	policy := func(int, *whMsg) whAnswer {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return whAnswer{status: http.StatusServiceUnavailable}
		}
		return whAnswer{process: true}
	}
	rStuck, rDead := newWhReceiver(t, policy), newWhReceiver(t, policy)
	stuck := createWebhook(t, g, stream, map[string]any{"url": rStuck.url(), "secret": rStuck.secret, "max_attempts": 1000, "batch_max_events": 1})
	dead := createWebhook(t, g, stream, map[string]any{"url": rDead.url(), "secret": rDead.secret, "max_attempts": 3, "batch_max_events": 1})
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	w := newWriter(t, "conwh"+run)
	if err := w.insert(ctx, "poison", 1); err != nil {
		t.Fatal(err)
	}

	d := openDashboard(t, ctx, chromium, stream, w.tag)
	if err := chromedpViewport(d, 1400, 1000); err != nil {
		t.Fatal(err)
	}
	card := func(id string) string { return fmt.Sprintf(`document.querySelector('[data-webhook=%q]')`, id) }

	// The overview counts the stuck batch in flight.
	navigate(t, d, g.url+"/?view=overview")
	waitJS(t, d, "the stream's webhook batches in flight on the overview", time.Minute,
		fmt.Sprintf(`(document.querySelector('#overview-streams [data-stream=%q] [data-k=webhooks-in-flight]') || {}).textContent === '1'`, stream))

	navigate(t, d, g.url+"/?view=webhooks&stream="+url.QueryEscape(stream))
	pend := card(stuck.ID) + `.querySelector('.pending')`
	waitJS(t, d, "the stuck webhook's pending batch: attempts, the receiver's 503, the next retry", time.Minute,
		pend+` && +`+pend+`.dataset.attempts >= 2 && /503/.test(`+pend+`.textContent) && `+pend+`.querySelector('time.next').dateTime !== ''`)
	dl := card(dead.ID) + `.querySelector('.dead-letters tbody tr')`
	waitJS(t, d, "the dead letter with its attempts and last error", time.Minute,
		dl+` && `+dl+`.cells[3].textContent === '3' && /503/.test(`+dl+`.cells[4].textContent) && `+dl+`.cells[5].textContent === 'no'`)
	failChart := card(stuck.ID) + `.querySelector('.chart.failures')`
	waitJS(t, d, "the stuck webhook's failure chart, with failures", time.Minute,
		failChart+` && `+failChart+`.querySelector('.uplot') && +(/failed now [^,]+, highest ([0-9.]+)/.exec(`+failChart+`.getAttribute('aria-label')) || [0, 0])[1] > 0`)
	screenshot(t, d, "webhooks.png")

	// Pause, then resume, from the page.
	clickAction(t, d, stuck.ID, "pause")
	waitAPI(t, "the webhook paused", func() error { return wantState(g, stream, stuck.ID, "paused") })
	waitJS(t, d, "the page showing it paused", 30*time.Second, card(stuck.ID)+`.querySelector('span.state').textContent === 'paused'`)
	mu.Lock()
	failing = false
	mu.Unlock()
	clickAction(t, d, stuck.ID, "resume")
	waitAPI(t, "the webhook active again", func() error { return wantState(g, stream, stuck.ID, "active") })
	rStuck.waitRows(t, ctx, w.since(0))
	latChart := card(stuck.ID) + `.querySelector('.chart.latency')`
	waitJS(t, d, "the latency chart with the delivered batch", time.Minute,
		latChart+` && /mean latency now [0-9.]+ s/.test(`+latChart+`.getAttribute('aria-label')) && !`+pend)

	// Replay the dead letter.
	clickIn(t, d, fmt.Sprintf(`[data-webhook=%q] .dead-letters`, dead.ID), "replay")
	waitJS(t, d, "the dead letter shown replayed", 30*time.Second, dl+` && `+dl+`.cells[5].textContent === 'yes'`)
	rDead.waitRows(t, ctx, w.since(0))

	// Rotate the stuck webhook's secret.
	clickAction(t, d, stuck.ID, "rotate")
	waitJS(t, d, "the new secret shown once", 30*time.Second, card(stuck.ID)+`.querySelector('code.secret').textContent.length >= 16`)
	waitAPI(t, "the old secret expiring", func() error {
		var v struct {
			Expire string `json:"previous_secrets_expire_at"`
		}
		if st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/webhooks/"+stuck.ID, nil, &v); err != nil || st != 200 {
			return fmt.Errorf("GET: %d %v", st, err)
		}
		if v.Expire == "" {
			return fmt.Errorf("no previous_secrets_expire_at")
		}
		return nil
	})

	// Purge the dead letters.
	clickAction(t, d, dead.ID, "purge")
	waitAPI(t, "the dead letters purged", func() error {
		if v := getWebhook(t, g, stream, dead.ID); v.DeadLetters != 0 {
			return fmt.Errorf("%d dead letters", v.DeadLetters)
		}
		return nil
	})
	waitJS(t, d, "no dead letters on the page", 30*time.Second, card(dead.ID)+` && !`+card(dead.ID)+`.querySelector('.dead-letters')`)
}

// clickAction clicks a webhook card's admin action, then its confirmation.
func clickAction(t *testing.T, d *dashboard, id, action string) {
	t.Helper()
	clickIn(t, d, fmt.Sprintf(`[data-webhook=%q] .actions`, id), action)
}

// clickIn clicks the action button named action inside scope, then the
// confirmation it asks for.
func clickIn(t *testing.T, d *dashboard, scope, action string) {
	t.Helper()
	click(t, d, fmt.Sprintf(`%s button.act[data-action=%q]`, scope, action))
	click(t, d, scope+` button.confirm`)
}

func wantState(g *gateway, stream, id, state string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v whView
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/webhooks/"+id, nil, &v); err != nil || st != 200 {
		return fmt.Errorf("GET: %d %v", st, err)
	}
	if v.State != state {
		return fmt.Errorf("state %s", v.State)
	}
	return nil
}

func waitAPI(t *testing.T, what string, fn func() error) {
	t.Helper()
	eventually(t, 30*time.Second, what, fn)
}

func chromedpViewport(d *dashboard, w, h int64) error {
	return chromedp.Do(d.ctx, chromedp.EmulateViewport(w, h))
}
