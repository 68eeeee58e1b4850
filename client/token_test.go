package client_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/client"
)

// Tokens that expire every few seconds do not cost a row, nor repeat one:
// the WebSocket takes a fresh token in-band before its token expires and
// stays open; SSE, which cannot, is ended by the gateway at the token's
// exp and reopened with a fresh one from the cursor; the poller presents
// a fresh token with each request once its token is about to expire.
func TestShortLivedTokens(t *testing.T) {
	const ttl = 3 * time.Second
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, withAuth...)
			var minted atomic.Int32
			rt := &counting{}
			c := dial(t, g.url, client.WithTransport(tr), client.WithStart("now"), client.WithPoll(time.Second, 100),
				client.WithHTTPClient(&http.Client{Transport: rt}),
				client.WithToken(func(context.Context) (string, error) {
					minted.Add(1)
					return mint(t, "alice", ttl, nil), nil
				}))
			opened := rt.count("/ws") + rt.count("/sse")
			// Two token lifetimes and more, a row every 100 ms (pacing,
			// not a wait: each row is awaited).
			end := time.Now().Add(2*ttl + time.Second)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			var got, want []int
			for time.Now().Before(end) {
				<-tick.C
				before := len(g.log.written())
				g.log.append(1)
				row := g.log.written()[before:]
				part, _ := readRows(t, c, row)
				got, want = append(got, part...), append(want, row...)
			}
			exactlyOnce(t, tr.String(), got, want)
			if minted.Load() < 3 {
				t.Errorf("%d tokens minted over two lifetimes and more", minted.Load())
			}
			reconnects := rt.count("/ws") + rt.count("/sse") - opened
			switch tr {
			case client.WebSocket:
				if reconnects != 0 {
					t.Errorf("the WebSocket was reopened %d times: its tokens were not refreshed in-band", reconnects)
				}
			case client.SSE:
				if reconnects < 2 {
					t.Errorf("SSE reopened %d times over two token lifetimes and more", reconnects)
				}
			}
			if tr == client.Poll && minted.Load() > 5 {
				t.Errorf("%d tokens minted for %d polls: a token is replaced only when about to expire", minted.Load(), rt.count("/changes"))
			}
			t.Logf("%d rows, %d tokens, %d connections after the first, %d polls", len(got), minted.Load(), reconnects, rt.count("/changes"))
		})
	}
}

// counting is an http.RoundTripper that counts requests by the last
// element of their path.
type counting struct {
	mu     sync.Mutex
	byPath map[string]int
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	p := req.URL.Path
	c.mu.Lock()
	if c.byPath == nil {
		c.byPath = map[string]int{}
	}
	c.byPath[p[strings.LastIndexByte(p, '/'):]]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

// count is how many requests went to paths ending in suffix ("/ack").
func (c *counting) count(suffix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byPath[suffix]
}
