package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
)

// newRedisAuthFixture is newAuthFixture on a Redis of its own: subscriber
// states are stored as in production.
func newRedisAuthFixture(t *testing.T) *authFixture {
	t.Helper()
	node := redistest.StartNode(t, redistest.NodeOptions{})
	st, err := redisstore.New(context.Background(), "redis://"+node.Addr()+"/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, _ := newTestServerOn(t, st)
	return newAuthFixtureOf(t, s)
}

// A named subscriber is bound to the table scope it was created with: its
// cursor passed the rows its scope withheld, so a reader with a wider (or
// another) scope would never get them. Every transport and the ack refuse
// another scope with 409 subscriber_scope_mismatch naming both; a token
// whose globs differ but whose scope on the stream is the same is let in.
func TestSubscriberScopeBound(t *testing.T) {
	f := newRedisAuthFixture(t)
	tables := func(globs ...string) func(c *auth.Claims) {
		return func(c *auth.Claims) { c.Tables = globs }
	}
	narrow := f.mint(t, "alice", tables("customer.customer"))
	wide := f.mint(t, "alice", tables("customer.*"))
	sameScope := f.mint(t, "alice", tables("customer.customer", "commerce.*"))

	type answer struct {
		status int
		body   string
	}
	ack := func(token, sub string) answer {
		req := endpoint{method: "POST", path: "/v1/streams/customers/subscribers/" + sub + "/ack", body: `{"cursor":"` + f.tok + `"}`}.request(token)
		resp, body := doRequest(t, f.h, req)
		return answer{resp.StatusCode, string(body)}
	}
	if r := ack(narrow, "alice"); r.status != 200 {
		t.Fatalf("first ack: %+v", r)
	}

	readers := []endpoint{
		{method: "GET", path: "/v1/streams/customers/changes?subscriber=alice"},
		{method: "GET", path: "/v1/streams/customers/sse?subscriber=alice"},
		{method: "GET", path: "/v1/streams/customers/ws?subscriber=alice", ws: true},
	}
	for _, e := range readers {
		// A reader let in would stream until its context ends: the test
		// then fails on its 200 instead of waiting for good.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req := e.request(wide).WithContext(ctx)
		resp, body := doRequest(t, f.h, req)
		msg := string(body)
		if resp.StatusCode != 409 || errorCode(body) != "subscriber_scope_mismatch" ||
			!strings.Contains(msg, `[\"customer\"]`) || !strings.Contains(msg, `[\"corder\",\"customer\"]`) {
			t.Errorf("%s with a wider scope: %d %s, want 409 subscriber_scope_mismatch naming both scopes", e.path, resp.StatusCode, body)
		}
		cancel()
	}
	if r := ack(wide, "alice"); r.status != 409 || errorCode([]byte(r.body)) != "subscriber_scope_mismatch" {
		t.Errorf("ack with a wider scope: %d %s, want 409 subscriber_scope_mismatch", r.status, r.body)
	}
	if r := ack(sameScope, "alice"); r.status != 200 {
		t.Errorf("ack with other globs but the same scope on the stream: %+v", r)
	}

	// A subscriber stored before scopes were adopts the scope of its next
	// request, and is bound to it from then on.
	if _, err := f.API().Cursors.Ack(context.Background(), "customers", "alice.legacy", testVGtid()); err != nil {
		t.Fatal(err)
	}
	if r := ack(wide, "alice.legacy"); r.status != 200 {
		t.Fatalf("legacy subscriber's next ack: %+v", r)
	}
	st, err := f.API().Cursors.Get(context.Background(), "customers", "alice.legacy")
	if err != nil {
		t.Fatal(err)
	}
	if st.Scope == nil || strings.Join(st.Scope.Tables, ",") != "corder,customer" {
		t.Errorf("legacy subscriber's scope after its next request: %+v", st.Scope)
	}
	if r := ack(narrow, "alice.legacy"); r.status != 409 {
		t.Errorf("legacy subscriber, then a narrower scope: %d %s, want 409", r.status, r.body)
	}
}

// /v1/stats shows a non-admin token only the streams whose every table its
// tables claim covers: a stream's numbers (events in, its tail's ring and
// position, their history) are the whole stream's, and would tell the
// volume of tables outside the scope. Admin tokens see every stream.
func TestStatsScope(t *testing.T) {
	f := newAuthFixture(t)
	streamsOf := func(token string) []string {
		t.Helper()
		req := endpoint{method: "GET", path: "/v1/stats"}.request(token)
		resp, body := doRequest(t, f.h, req)
		if resp.StatusCode != 200 {
			t.Fatalf("stats: %d %s", resp.StatusCode, body)
		}
		var rep struct{ Streams []struct{ Name string } }
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range rep.Streams {
			names = append(names, s.Name)
		}
		return names
	}
	tables := func(globs ...string) func(c *auth.Claims) {
		return func(c *auth.Claims) { c.Tables = globs }
	}
	for _, c := range []struct {
		name  string
		token string
		want  string
	}{
		{"one of the stream's two tables", f.mint(t, "alice", tables("customer.customer")), ""},
		{"both tables", f.mint(t, "alice", tables("customer.customer", "customer.corder")), "customers"},
		{"the keyspace", f.mint(t, "alice", tables("customer.*")), "customers"},
		{"admin, one table", f.mint(t, "ops", func(c *auth.Claims) { c.Tables, c.Scope = []string{"customer.customer"}, "admin" }), "customers"},
	} {
		if got := strings.Join(streamsOf(c.token), ","); got != c.want {
			t.Errorf("%s: stats of %q, want %q", c.name, got, c.want)
		}
	}
}
