package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleAccessible checks every view of the console in headless
// Chromium, with a named subscriber and a webhook with a dead letter so
// that every kind of action is on screen:
//   - keyboard: Tab reaches every link, button, field and scrollable
//     region of the view (and the header), each showing a focus ring of
//     at least 2 px; an admin action is carried out with Enter alone
//     (Pause, then its confirmation), checked through the API;
//   - contrast: every piece of visible text meets WCAG AA (4.5:1, 3:1
//     for large text) against its actual background;
//   - charts are images with a text summary.
func TestConsoleAccessible(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	g := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g, "cona11y")
	r := newWhReceiver(t, func(int, *whMsg) whAnswer { return whAnswer{status: http.StatusServiceUnavailable} })
	wh := createWebhook(t, g, stream, map[string]any{"url": r.url(), "secret": r.secret, "max_attempts": 1, "batch_max_events": 1})
	sub := "kbd"
	var pulled struct {
		NextCursor string `json:"next_cursor"`
	}
	if st, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/changes?start=now&limit=10&subscriber="+sub, nil, &pulled); err != nil || st != 200 {
		t.Fatalf("pull: %d %v", st, err)
	}
	if st, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/subscribers/"+sub+"/ack", map[string]string{"cursor": pulled.NextCursor}, nil); err != nil || st != 200 {
		t.Fatalf("ack: %d %v", st, err)
	}
	d := openDashboard(t, ctx, chromium, stream, "cona11y"+fmt.Sprint(time.Now().UnixNano()%1e9))
	w := newWriter(t, d.tag)
	if err := w.insert(ctx, "row", 2); err != nil {
		t.Fatal(err)
	}
	if err := chromedpViewport(d, 1400, 1000); err != nil {
		t.Fatal(err)
	}

	views := []struct{ name, query, ready string }{
		{"overview", "view=overview", fmt.Sprintf(`document.querySelectorAll('#overview-streams [data-stream=%q] .uplot').length === 2`, stream)},
		{"stream", url.Values{"stream": {stream}}.Encode(), fmt.Sprintf(`/^connected/.test(document.getElementById('state').textContent) && document.querySelector('#subscriber-list tr[data-subscriber=%q] button.act')`, sub)},
		{"reshards", "view=reshards", `!document.getElementById('view-reshards').hidden`},
		{"webhooks", "view=webhooks&stream=" + url.QueryEscape(stream), fmt.Sprintf(`document.querySelector('[data-webhook=%q] .dead-letters button.act')`, wh.ID)},
	}
	for _, v := range views {
		navigate(t, d, g.url+"/?"+v.query)
		waitJS(t, d, "the "+v.name+" view", time.Minute, v.ready)
		seen := tabThrough(t, d, "")
		want, err := chromedp.Run(d.ctx, chromedp.Evaluate[[]string](a11yJS+`a11y.focusables().map(a11y.key)`))
		if err != nil {
			t.Fatal(err)
		}
		reached := map[string]bool{}
		for _, f := range seen {
			reached[f.Key] = true
			if !f.Ring {
				t.Errorf("%s view: %s has no visible focus ring (outline %s)", v.name, f.Key, f.Outline)
			}
		}
		for _, k := range want {
			if !reached[k] {
				t.Errorf("%s view: %s is not reachable with Tab (reached: %v)", v.name, k, keys(seen))
			}
		}
		fails, err := chromedp.Run(d.ctx, chromedp.Evaluate[[]string](a11yJS+`a11y.contrast()`))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fails {
			t.Errorf("%s view: contrast below WCAG AA: %s", v.name, f)
		}
		unlabelled, err := chromedp.Run(d.ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('.chart')].filter((c) => c.offsetParent && c.querySelector('.uplot') && !/^Chart of .+: .+\.$/.test(c.getAttribute('aria-label') || '') || (c.offsetParent && c.querySelector('.uplot') && c.getAttribute('role') !== 'img')).length`))
		if err != nil {
			t.Fatal(err)
		}
		if unlabelled > 0 {
			t.Errorf("%s view: %d charts without a text summary", v.name, unlabelled)
		}
		t.Logf("%s view: %d focusable controls, all reached with Tab; %d text contrast failures", v.name, len(want), len(fails))
	}

	// An admin action with the keyboard alone: Tab to Pause, Enter, Enter.
	tabThrough(t, d, fmt.Sprintf("BUTTON||pause|webhook=%s", wh.ID))
	if err := chromedp.Do(d.ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, d, "the confirmation focused", 10*time.Second, `document.activeElement.classList.contains('confirm')`)
	if err := chromedp.Do(d.ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	waitAPI(t, "the webhook paused from the keyboard", func() error { return wantState(g, stream, wh.ID, "paused") })
}

type focusStop struct {
	Key     string `json:"key"`
	Ring    bool   `json:"ring"`
	Outline string `json:"outline"`
}

func keys(fs []focusStop) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Key)
	}
	return out
}

// tabThrough presses Tab from the top of the page until the focus comes
// back to where it started (or, with until set, stops on that control),
// and returns where it went.
func tabThrough(t *testing.T, d *dashboard, until string) []focusStop {
	t.Helper()
	if _, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](`(() => { document.activeElement && document.activeElement.blur(); window.getSelection().removeAllRanges(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	var out []focusStop
	for i := 0; i < 400; i++ {
		if err := chromedp.Do(d.ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			t.Fatal(err)
		}
		f, err := chromedp.Run(d.ctx, chromedp.Evaluate[focusStop](a11yJS+`a11y.stop()`))
		if err != nil {
			t.Fatal(err)
		}
		if until != "" && f.Key == until {
			return out
		}
		if len(out) > 0 && f.Key == out[0].Key {
			break
		}
		if f.Key != "" {
			out = append(out, f)
		}
	}
	if until != "" {
		t.Fatalf("Tab never reached %s: %v", until, keys(out))
	}
	return out
}

// a11yJS defines window.a11y: what can take the focus, a stable name for
// a control (its tag, id, action, the row or card it is in, its text), the
// focus ring of the focused control, and a WCAG contrast check of every
// visible text.
const a11yJS = `window.a11y = window.a11y || (() => {
  const visible = (n) => n.getClientRects().length > 0 && getComputedStyle(n).visibility !== 'hidden';
  const key = (n) => {
    const h = n.closest('[data-webhook], [data-subscriber], [data-seq], [data-stream]');
    const hk = h ? Object.entries(h.dataset).filter(([k]) => ['webhook', 'subscriber', 'seq', 'stream'].includes(k)).map(([k, v]) => k + '=' + v).join(',') : '';
    return [n.tagName, n.id, n.dataset.action || '', hk, n.dataset.action ? '' : (n.getAttribute('aria-label') || n.textContent).trim().slice(0, 24)].join('|').replace(/\|+$/, '');
  };
  const focusables = () => [...document.querySelectorAll('a[href], button, input, select, [tabindex]')]
    .filter((n) => !n.disabled && n.tabIndex >= 0 && visible(n) && !(n.type === 'radio' && !n.checked) && !n.closest('[hidden]'));
  const stop = () => {
    const a = document.activeElement;
    if (!a || a === document.body) return { key: '', ring: false, outline: '' };
    const cs = getComputedStyle(a);
    return { key: key(a), ring: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2, outline: cs.outlineStyle + ' ' + cs.outlineWidth + ' ' + cs.outlineColor };
  };
  const parse = (c) => { const p = (c.match(/[\d.]+/g) || []).map(Number); return { r: p[0] || 0, g: p[1] || 0, b: p[2] || 0, a: p.length > 3 ? p[3] : 1 }; };
  const over = (top, bottom) => ({ r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a), b: top.b * top.a + bottom.b * (1 - top.a), a: 1 });
  const lum = ({ r, g, b }) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const background = (n) => {
    const layers = [];
    for (; n; n = n.parentElement) {
      const c = parse(getComputedStyle(n).backgroundColor);
      if (c.a > 0) { layers.push(c); if (c.a === 1) break; }
    }
    return layers.reverse().reduce((bg, c) => over(c, bg), { r: 255, g: 255, b: 255, a: 1 });
  };
  const contrast = () => {
    const fails = [];
    const done = new Set();
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (w.nextNode()) {
      const n = w.currentNode.parentElement;
      if (!w.currentNode.textContent.trim() || done.has(n)) continue;
      done.add(n);
      if (!visible(n) || n.closest('[hidden], [disabled], .skip, script, style, option')) continue;
      const cs = getComputedStyle(n);
      const bg = background(n);
      const fg = over(parse(cs.color), bg);
      const l1 = lum(fg), l2 = lum(bg);
      const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
      const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
      const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
      if (ratio < need - 0.005) fails.push(n.tagName.toLowerCase() + (n.className ? '.' + String(n.className).replace(/ /g, '.') : '') + ' "' + w.currentNode.textContent.trim().slice(0, 30) + '" ' + ratio.toFixed(2) + ':1 (' + cs.color + ' on rgb(' + [bg.r, bg.g, bg.b].map(Math.round) + '))');
    }
    return fails;
  };
  return { key, focusables, stop, contrast };
})();
`
