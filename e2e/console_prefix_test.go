package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConsolePrefix serves the console behind a reverse proxy under /vsg/
// (httputil.ReverseProxy stripping the prefix, as a load balancer or an
// ingress would) and uses it through the proxy only: the page loads with
// its styles, scripts and vendored charts, the live table receives rows
// over SSE and then over WebSocket, the current rows page in, and the
// overview draws its charts. Anything the page asked for outside /vsg/
// gets 404 from the proxy and is reported.
func TestConsolePrefix(t *testing.T) {
	needE2E(t)
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	g := startGateway(t, withDataDir(t)...)
	stream := newCustomerStream(t, g, "conpfx")
	target, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	var outside []string
	var outsideMu sync.Mutex
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/vsg")
		r.Out.URL.RawPath = ""
		r.Out.Host = r.In.Host // the browser's Origin names the proxy
		r.SetXForwarded()
	}}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/vsg/") {
			outsideMu.Lock()
			outside = append(outside, r.URL.String())
			outsideMu.Unlock()
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	d := openDashboard(t, ctx, chromium, stream, "conpfx"+fmt.Sprint(time.Now().UnixNano()%1e9))
	w := newWriter(t, d.tag)
	for _, transport := range []string{"sse", "ws"} {
		navigate(t, d, front.URL+"/vsg/?"+url.Values{"stream": {stream}, "transport": {transport}}.Encode())
		d.waitFor("connected through the proxy over "+transport, 30*time.Second, func(s *dashSnapshot) bool {
			return strings.HasPrefix(s.State, "connected") && s.Saved != ""
		})
		n := len(w.since(0))
		if err := w.insert(ctx, transport, 3); err != nil {
			t.Fatal(err)
		}
		d.waitSeen("rows over "+transport+" through the proxy", w.since(n))
	}
	waitJS(t, d, "the stylesheet applied", 10*time.Second, `getComputedStyle(document.querySelector('header')).display === 'flex'`)
	click(t, d, "#current-load")
	waitJS(t, d, "current rows through the proxy", 60*time.Second, `document.querySelectorAll('#current-rows tbody tr').length > 0`)
	click(t, d, `#nav a[data-view=overview]`)
	waitJS(t, d, "the overview's charts through the proxy", 30*time.Second,
		fmt.Sprintf(`location.pathname === '/vsg/' && document.querySelectorAll('#overview-streams [data-stream=%q] .uplot').length === 2`, stream))
	outsideMu.Lock()
	defer outsideMu.Unlock()
	if len(outside) > 0 {
		t.Errorf("the page asked for URLs outside its prefix: %v", outside)
	}
}
