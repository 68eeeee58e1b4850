package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
)

// expiryFixture serves an auth fixture on Redis over a real listener.
type expiryFixture struct {
	*authFixture
	srv *httptest.Server
	doc *openapi3.T
}

func newExpiryFixture(t *testing.T) *expiryFixture {
	f := newRedisAuthFixture(t)
	doc, _ := loadSpec(t)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	return &expiryFixture{authFixture: f, srv: srv, doc: doc}
}

// token mints a token for sub expiring at exp (whole seconds, as JWTs
// carry it) with the table globs given.
func (f *expiryFixture) token(t *testing.T, sub string, exp time.Time, tables ...string) string {
	return f.mint(t, sub, func(c *auth.Claims) {
		c.ExpiresAt = jwt.NewNumericDate(exp)
		c.Tables = tables
	})
}

// matches fails t unless msg is JSON matching the spec's schema.
func (f *expiryFixture) matches(t *testing.T, schema, msg string) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(msg), &v); err != nil {
		t.Errorf("%s: not JSON: %q", schema, msg)
		return
	}
	if err := f.doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("%s does not match %s: %v", msg, schema, err)
	}
}

func (f *expiryFixture) dial(ctx context.Context, t *testing.T, query, token string) *websocket.Conn {
	t.Helper()
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/v1/streams/customers/ws?cursor=" + f.tok + query
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: []string{"vsg.v1"},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

type disconnectMsg struct {
	Code           int
	Reason, Cursor string
}

// closed reads c until the server closes it and returns the disconnect
// message and the close code.
func (f *expiryFixture) closed(ctx context.Context, t *testing.T, c *websocket.Conn) (disconnectMsg, websocket.StatusCode) {
	t.Helper()
	var bye disconnectMsg
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the connection was not closed: %v", err)
			}
			return bye, websocket.CloseStatus(err)
		}
		var m struct{ Type string }
		json.Unmarshal(msg, &m)
		if m.Type == "disconnect" {
			f.matches(t, "Disconnect", string(msg))
			json.Unmarshal(msg, &bye)
		}
	}
}

// A WebSocket closes at its token's exp, with 4010 token_expired after a
// disconnect message carrying the cursor to resume from; a refresh with a
// later token moves the close to that token's exp.
func TestWebSocketTokenExpiry(t *testing.T) {
	f := newExpiryFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
	c := f.dial(ctx, t, "&subscriber=alice", f.token(t, "alice", exp, "customer.customer"))
	bye, code := f.closed(ctx, t, c)
	if code != 4010 || bye.Code != 4010 || bye.Reason != "token_expired" || bye.Cursor == "" {
		t.Errorf("closed with %d after %+v, want 4010 token_expired with a cursor", code, bye)
	}
	if now := time.Now(); now.Before(exp) {
		t.Errorf("closed %v before the token's exp", exp.Sub(now))
	}

	// Refreshed before its exp, with a token of the same scope: the
	// connection lives until the new token's exp.
	exp = time.Now().Add(2 * time.Second).Truncate(time.Second)
	later := exp.Add(2 * time.Second)
	c = f.dial(ctx, t, "&subscriber=alice", f.token(t, "alice", exp, "customer.customer"))
	refresh := `{"refresh":"` + f.token(t, "alice", later, "customer.customer", "commerce.*") + `"}`
	if err := c.Write(ctx, websocket.MessageText, []byte(refresh)); err != nil {
		t.Fatal(err)
	}
	bye, code = f.closed(ctx, t, c)
	if code != 4010 || bye.Reason != "token_expired" {
		t.Errorf("refreshed connection closed with %d after %+v, want 4010 token_expired", code, bye)
	}
	if now := time.Now(); now.Before(later) {
		t.Errorf("refreshed connection closed %v before the refreshed token's exp (%v after the first's)", later.Sub(now), now.Sub(exp))
	}
}

// A refresh that cannot continue the connection closes it with 4003, the
// reason saying why: a token that does not verify, another subject, a
// named subscriber's scope changed, an anonymous reader's scope widened
// (narrowing is taken, and counts for the next refresh).
func TestWebSocketRefreshRefused(t *testing.T) {
	f := newExpiryFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hour := time.Now().Add(time.Hour)
	narrow := f.token(t, "alice", hour, "customer.customer")

	for _, tc := range []struct {
		name, query, open string
		refresh           []string
		reason            string
	}{
		{"garbage", "&subscriber=alice", narrow, []string{"garbage"}, "unauthorized"},
		{"expired", "&subscriber=alice", narrow, []string{f.token(t, "alice", time.Now().Add(-time.Hour), "customer.customer")}, "unauthorized"},
		{"another subject", "", narrow, []string{f.token(t, "bob", hour, "customer.customer")}, "forbidden"},
		{"subscriber scope", "&subscriber=alice", narrow, []string{f.token(t, "alice", hour, "customer.*")}, "subscriber_scope_mismatch"},
		{"anonymous wider", "", narrow, []string{f.token(t, "alice", hour, "customer.*")}, "forbidden"},
		{"anonymous narrower, then back", "", f.token(t, "alice", hour, "*"),
			[]string{narrow, f.token(t, "alice", hour, "customer.*")}, "forbidden"},
	} {
		c := f.dial(ctx, t, tc.query, tc.open)
		for _, r := range tc.refresh {
			if err := c.Write(ctx, websocket.MessageText, []byte(`{"refresh":"`+r+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
		bye, code := f.closed(ctx, t, c)
		if code != 4003 || bye.Code != 4003 || bye.Reason != tc.reason || bye.Cursor == "" {
			t.Errorf("%s: closed with %d after %+v, want 4003 %s with a cursor", tc.name, code, bye, tc.reason)
		}
	}
}

// An SSE stream ends at its token's exp with a final token_expired event
// whose id and data carry the cursor to resume from.
func TestSSETokenExpiry(t *testing.T) {
	f := newExpiryFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/streams/customers/sse?cursor="+f.tok, nil)
	req.Header.Set("Authorization", "Bearer "+f.token(t, "alice", exp, "customer.customer"))
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var id, event, data string
	for event != "token_expired" || data == "" {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended without a token_expired event: %v", err)
		}
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		switch k {
		case "id":
			id = v
		case "event":
			event, data = v, ""
		case "data":
			data = v
		}
	}
	if time.Now().Before(exp) {
		t.Errorf("token_expired before the token's exp")
	}
	f.matches(t, "SSETokenExpired", data)
	var m struct{ Cursor string }
	json.Unmarshal([]byte(data), &m)
	if m.Cursor == "" || m.Cursor != id {
		t.Errorf("token_expired: id %q, data %s; want the cursor in both", id, data)
	}
	if rest, err := r.ReadString('\n'); rest != "\n" || err != nil {
		t.Errorf("after token_expired: %q %v, want the event's end", rest, err)
	}
	if rest, err := r.ReadString('\n'); err == nil {
		t.Errorf("the stream goes on after token_expired: %q", rest)
	}
}

// A long-poll ends at its token's exp, with what arrived before it: it
// never holds the request open past exp to hand over rows the token no
// longer covers. (The next request with that token is refused with 401
// once the verifier's leeway for clock skew has passed too.)
func TestLongPollEndsAtTokenExpiry(t *testing.T) {
	f := newExpiryFixture(t)
	// Far less than the 30 s wait asked: a page held to its wait fails.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
	token := f.token(t, "alice", exp, "customer.customer")
	get := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/streams/customers/changes?wait=30s&cursor="+f.tok, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return f.srv.Client().Do(req)
	}
	resp, err := get()
	if err != nil {
		t.Fatalf("long-poll held past the token's exp: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Vsg-Next-Cursor") == "" {
		t.Fatalf("long-poll: %d, next cursor %q; want 200 with a cursor", resp.StatusCode, resp.Header.Get("Vsg-Next-Cursor"))
	}
	// Past exp, within the verifier's leeway for clock skew (30 s), the
	// token still verifies: the page is answered at once, never held.
	for time.Now().Before(exp) {
		if resp, err = get(); err != nil {
			t.Fatalf("long-poll held past the token's exp: %v", err)
		}
		resp.Body.Close()
	}
	if resp, err = get(); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a request past the token's exp, within the leeway: %v %v, want 200 at once", resp, err)
	}
	resp.Body.Close()
}
