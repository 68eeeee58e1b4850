package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
)

// FuzzRequests drives the real router with arbitrary stream definitions,
// acks, query parameters and tokens: no input may panic (the recoverer
// would turn a panic into a 500) or get a 5xx, and every refusal is a
// documented JSON error.
func FuzzRequests(f *testing.F) {
	s, _ := newTestServer(f)
	s.api.PullConfig.FirstWait = time.Millisecond
	s.api.PullConfig.MaxWait = 5 * time.Millisecond
	s.api.SSEConfig.CursorHeartbeat = time.Millisecond
	s.api.WebSocketConfig.CursorHeartbeat = time.Millisecond
	h := s.Router()
	loadSpec(f)
	create := httptest.NewRequest("POST", "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer"]}`))
	h.ServeHTTP(httptest.NewRecorder(), create)

	for _, seed := range []struct {
		op          uint8
		query, body string
	}{
		{0, "", `{"name":"x","keyspace":"customer","tables":["t"]}`},
		{0, "", `{"name":"x","keyspace":"customer","rules":[{"match":"t","filter":"select a from t where b = 1"}]}`},
		{0, "", `{"name":"x","keyspace":"customer","rules":[{"match":"/^t","filter":""}],"start":"snapshot","on_gap":"fail"}`},
		{1, "limit=5&wait=1ms&cursor=abc", ""},
		{1, "limit=-1&wait=1e400", ""},
		{1, "wait=NaN&subscriber=a.b", ""},
		{1, "limit=99999999999999999999&wait=-0", ""},
		{2, "subscriber=..&cursor=%00", ""},
		{3, "", `{"cursor":"AAAA"}`},
		{3, "", `{"cursor":1}`},
		{4, "access_token=a.b.c", ""},
	} {
		f.Add(seed.op, seed.query, seed.body)
	}
	ops := []struct{ method, path string }{
		{"POST", "/v1/streams"},
		{"GET", "/v1/streams/customers/changes"},
		{"GET", "/v1/streams/customers/sse"},
		{"POST", "/v1/streams/customers/subscribers/app/ack"},
		{"GET", "/v1/streams"},
	}
	f.Fuzz(func(t *testing.T, op uint8, query, body string) {
		o := ops[int(op)%len(ops)]
		u := &url.URL{Path: o.path, RawQuery: query}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req := httptest.NewRequest(o.method, o.path, strings.NewReader(body)).WithContext(ctx)
		req.URL.RawQuery = query // as received: the server parses it
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && ctx.Err() == nil {
			// (A request whose client gave up may end in a 500 nobody reads.)
			t.Fatalf("%s %s body %q: %d %s", o.method, u, body, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("%s %s: %d without a JSON error", o.method, u, rec.Code)
		}
		if rec.Code == http.StatusCreated {
			// Keep the registry small: drop what the fuzzer created.
			name := strings.SplitN(strings.SplitN(rec.Body.String(), `"name":"`, 2)[1], `"`, 2)[0]
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("DELETE", "/v1/streams/"+url.PathEscape(name), nil))
		}
	})
}

// FuzzTokenHeader: arbitrary Authorization headers, subprotocols and
// access_token values get 401 (or pass with a valid token), never a panic.
func FuzzTokenHeader(f *testing.F) {
	s, _ := newTestServer(f)
	v, err := auth.New(context.Background(), auth.WithHMACSecrets(authSecret))
	if err != nil {
		f.Fatal(err)
	}
	s.authn = &Authenticator{verifier: v, log: s.log}
	h := s.Router()
	f.Add("Bearer a.b.c", "vsg.v1, bearer.x", "q")
	f.Add("Basic Zm9vOmJhcg==", "", "")
	f.Add("", "bearer.", "eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, authz, proto, query string) {
		req := httptest.NewRequest("GET", "/v1/streams", nil)
		req.URL.RawQuery = url.Values{"access_token": {query}}.Encode()
		req.Header.Set("Authorization", authz)
		req.Header.Set("Sec-WebSocket-Protocol", proto)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("Authorization %q, protocol %q, access_token %q: %d", authz, proto, query, rec.Code)
		}
	})
}
