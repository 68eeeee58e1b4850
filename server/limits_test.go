package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vstream-gateway/vstream-gateway/auth"
)

// TestAdminRateLimit: past the burst, admin requests get 429 rate_limited
// with Retry-After (as documented), per token subject.
func TestAdminRateLimit(t *testing.T) {
	f := newAuthFixture(t)
	f.limits = newLimiter(&Config{AdminRate: 0.5, AdminBurst: 2, MaxConnsPerToken: 32})
	f.h = f.Router()
	admin := f.mint(t, "ops", func(c *auth.Claims) { c.Scope = "admin" })
	other := f.mint(t, "ops2", func(c *auth.Claims) { c.Scope = "admin" })
	del := endpoint{method: "DELETE", path: "/v1/streams/nope", admin: true}
	for i := 0; i < 2; i++ {
		if resp, body := doRequest(t, f.h, del.request(admin)); resp.StatusCode != 404 {
			t.Fatalf("request %d within the burst: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := doRequest(t, f.h, del.request(admin))
	if resp.StatusCode != http.StatusTooManyRequests || errorCode(body) != "rate_limited" {
		t.Fatalf("past the burst: %d %s", resp.StatusCode, body)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 || n > 2 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	if resp, _ := doRequest(t, f.h, del.request(other)); resp.StatusCode != 404 {
		t.Errorf("another subject shares the bucket: %d", resp.StatusCode)
	}
	// Reading is not the admin API and is not limited.
	for i := 0; i < 5; i++ {
		if resp, _ := doRequest(t, f.h, endpoint{method: "GET", path: "/v1/streams"}.request(admin)); resp.StatusCode != 200 {
			t.Fatalf("list: %d", resp.StatusCode)
		}
	}
}

// TestConnectionLimit: a token subject holding its maximum of streaming
// connections gets 429 for another until one closes.
func TestConnectionLimit(t *testing.T) {
	f := newAuthFixture(t)
	f.limits = newLimiter(&Config{AdminRate: 5, AdminBurst: 20, MaxConnsPerToken: 1})
	f.h = f.Router()
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	tok := f.mint(t, "alice", nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/streams/customers/sse?cursor="+f.tok, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first SSE: %v %v", resp, err)
	}
	second := endpoint{method: "GET", path: "/v1/streams/customers/changes?cursor=" + f.tok}
	r2, body := doRequest(t, f.h, second.request(tok))
	if r2.StatusCode != http.StatusTooManyRequests || errorCode(body) != "rate_limited" || r2.Header.Get("Retry-After") == "" {
		t.Errorf("second connection: %d %s", r2.StatusCode, body)
	}
	if r3, _ := doRequest(t, f.h, second.request(f.mint(t, "bob", nil))); r3.StatusCode != 200 {
		t.Errorf("another subject: %d", r3.StatusCode)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		r4, _ := doRequest(t, f.h, second.request(tok))
		if r4.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection slot not released: %d", r4.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCORS(t *testing.T) {
	f := newAuthFixture(t)
	f.cors = newCORS([]string{"https://dash.example"})
	f.h = f.Router()

	// Preflight: answered without a token.
	req := httptest.NewRequest("OPTIONS", "/v1/streams", nil)
	req.Header.Set("Origin", "https://dash.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Code != 204 || rec.Header().Get("Access-Control-Allow-Origin") != "https://dash.example" ||
		!strings.Contains(rec.Header().Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", rec.Code, rec.Header())
	}
	req.Header.Set("Origin", "https://evil.example")
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from a foreign origin allowed: %v", rec.Header())
	}

	// Actual request: the origin is echoed and pull headers exposed.
	get := endpoint{method: "GET", path: "/v1/streams"}.request(f.mint(t, "alice", nil))
	get.Header.Set("Origin", "https://dash.example")
	resp, _ := doRequest(t, f.h, get)
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://dash.example" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Vsg-Next-Cursor") {
		t.Errorf("CORS headers: %v", resp.Header)
	}

	// WebSockets: a foreign origin is refused, the gateway's own and
	// allowed ones pass (to the cursor check).
	for origin, want := range map[string]int{
		"https://evil.example": 403,
		"https://dash.example": 400,
		"http://example.com":   400, // httptest's Host: same origin
		"":                     400, // not a browser
	} {
		ws := endpoint{method: "GET", path: "/v1/streams/customers/ws?cursor=garbage", ws: true}.request(f.mint(t, "alice", nil))
		if origin != "" {
			ws.Header.Set("Origin", origin)
		}
		if resp, body := doRequest(t, f.h, ws); resp.StatusCode != want {
			t.Errorf("WebSocket from %q: %d %s, want %d", origin, resp.StatusCode, body, want)
		}
	}
}

// TestShutdownClosesWebSockets: when shutdown begins, a WebSocket gets the
// final disconnect message with its cursor and close code 4001, and the
// limiter's wait returns once the handler is gone.
func TestShutdownClosesWebSockets(t *testing.T) {
	f := newAuthFixture(t)
	closing, closeStreams := context.WithCancel(context.Background())
	defer closeStreams()
	f.closing, f.closeStreams, f.api.Shutdown = closing, closeStreams, closing
	f.h = f.Router()
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/streams/customers/ws?cursor=" + f.tok
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"vsg.v1", "bearer." + f.mint(t, "alice", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "vsg.v1" || strings.Contains(resp.Header.Get("Sec-WebSocket-Protocol"), "bearer") {
		t.Errorf("subprotocol answered: %q", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	closeStreams()
	var disconnect string
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != 4001 {
				t.Errorf("closed with %v, want 4001", err)
			}
			break
		}
		if strings.Contains(string(msg), `"type":"disconnect"`) {
			disconnect = string(msg)
		}
	}
	if !strings.Contains(disconnect, `"code":4001`) || !strings.Contains(disconnect, f.tok) {
		t.Errorf("disconnect message %q, want code 4001 and the cursor", disconnect)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	if err := f.limiter().wait(wctx); err != nil {
		t.Errorf("streaming handlers still running after shutdown: %v", err)
	}
}
