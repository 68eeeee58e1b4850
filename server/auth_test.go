package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

var (
	authSecret  = []byte("server-test-secret-0123456789abcdef")
	otherSecret = []byte("not-the-server-secret-0123456789abc")
)

// authFixture is a test server with authentication on: HS256 with
// authSecret and a JWKS holding one RSA key, audience "vsg", issuer
// "https://idp.test".
type authFixture struct {
	*Server
	h      http.Handler
	rsa    *rsa.PrivateKey
	pubPEM []byte
	tok    string // cursor token for stream customers
}

func newAuthFixture(t testing.TB) *authFixture {
	t.Helper()
	s, _ := newTestServer(t)
	return newAuthFixtureOf(t, s)
}

// newAuthFixtureOf is newAuthFixture around a test server of the caller's.
func newAuthFixtureOf(t testing.TB, s *Server) *authFixture {
	t.Helper()
	loadSpec(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jwk, _ := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgRS256}})
		json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	}))
	t.Cleanup(jwks.Close)
	v, err := auth.New(t.Context(), auth.WithHMACSecrets(authSecret), auth.WithJWKSURL(jwks.URL),
		auth.WithAudience("vsg"), auth.WithIssuer("https://idp.test"), auth.WithLeeway(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s.authn = &Authenticator{verifier: v, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.api.Verify = v.Verify
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	f := &authFixture{Server: s, rsa: key, pubPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
	f.h = s.Router()
	tok, err := s.API().Hub.Token(context.Background(), &streams.Definition{Name: "customers", Keyspace: "customer"}, testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	f.tok = tok
	// The stream the matrix reads, created with an admin token.
	req := httptest.NewRequest("POST", "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer","corder"]}`))
	req.Header.Set("Authorization", "Bearer "+f.mint(t, "ops", func(c *auth.Claims) { c.Scope = "admin" }))
	if resp, body := doRequest(t, f.h, req); resp.StatusCode != 201 {
		t.Fatalf("create stream: %d %s", resp.StatusCode, body)
	}
	return f
}

// mint returns a valid HS256 token for sub reading every stream and
// table, changed by edit.
func (f *authFixture) mint(t testing.TB, sub string, edit func(c *auth.Claims)) string {
	t.Helper()
	c := f.claims(sub)
	if edit != nil {
		edit(c)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(authSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rs256 signs c with the fixture's JWKS key.
func (f *authFixture) rs256(t testing.TB, c *auth.Claims) string {
	t.Helper()
	tk := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tk.Header["kid"] = "k1"
	s, err := tk.SignedString(f.rsa)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *authFixture) claims(sub string) *auth.Claims {
	now := time.Now()
	return &auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: sub, Audience: jwt.ClaimStrings{"vsg"}, Issuer: "https://idp.test",
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now),
		},
		Streams: []string{"*"},
		Tables:  []string{"*"},
	}
}

type endpoint struct {
	method, path, body string
	ws                 bool
	admin              bool // needs the admin scope
}

// endpoints lists every protected operation, with arguments that would
// succeed (or fail only after authorization) for an admin token.
func (f *authFixture) endpoints() []endpoint {
	ack := `{"cursor":"` + f.tok + `"}`
	return []endpoint{
		{method: "POST", path: "/v1/streams", body: `{"name":"other","keyspace":"customer","tables":["customer"]}`, admin: true},
		{method: "GET", path: "/v1/streams"},
		{method: "GET", path: "/v1/streams/customers"},
		{method: "DELETE", path: "/v1/streams/nope", admin: true},
		{method: "GET", path: "/v1/streams/customers/changes?cursor=garbage"},
		{method: "GET", path: "/v1/streams/customers/sse?cursor=garbage"},
		{method: "GET", path: "/v1/streams/customers/ws?cursor=garbage", ws: true},
		{method: "GET", path: "/v1/streams/customers/subscribers/alice"},
		{method: "DELETE", path: "/v1/streams/customers/subscribers/alice", admin: true},
		{method: "POST", path: "/v1/streams/customers/subscribers/alice/ack", body: ack},
	}
}

func (e endpoint) request(token string) *http.Request {
	var body io.Reader
	if e.body != "" {
		body = strings.NewReader(e.body)
	}
	req := httptest.NewRequest(e.method, e.path, body)
	if e.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.ws {
		wsHandshake(req)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func errorCode(body []byte) string {
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(body, &e)
	return e.Error.Code
}

// TestAuthMatrix sends forged, expired, misdirected and wrong-algorithm
// tokens to every protected endpoint: each is refused with 401, a
// WWW-Authenticate challenge and a body the spec documents.
func TestAuthMatrix(t *testing.T) {
	f := newAuthFixture(t)
	past := time.Now().Add(-time.Hour)
	rsaTok := func(kid string, c *auth.Claims) string {
		tk := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
		tk.Header["kid"] = kid
		s, err := tk.SignedString(f.rsa)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hs := func(key []byte, c *auth.Claims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, f.claims("alice")).SignedString(jwt.UnsafeAllowNoneSignatureType)
	edit := func(fn func(c *auth.Claims)) *auth.Claims { c := f.claims("alice"); fn(c); return c }

	bad := []struct{ name, token, reason string }{
		{"no token", "", auth.ReasonMissing},
		{"garbage", "garbage", auth.ReasonMalformed},
		{"forged HS256", hs(otherSecret, f.claims("alice")), auth.ReasonSignature},
		{"expired", f.mint(t, "alice", func(c *auth.Claims) { c.ExpiresAt = jwt.NewNumericDate(past) }), auth.ReasonExpired},
		{"no exp", f.mint(t, "alice", func(c *auth.Claims) { c.ExpiresAt = nil }), auth.ReasonClaims},
		{"wrong audience", f.mint(t, "alice", func(c *auth.Claims) { c.Audience = jwt.ClaimStrings{"other"} }), auth.ReasonAudience},
		{"wrong issuer", f.mint(t, "alice", func(c *auth.Claims) { c.Issuer = "https://evil.test" }), auth.ReasonIssuer},
		{"alg none", none, auth.ReasonAlgorithm},
		{"HS/RS confusion", hs(f.pubPEM, f.claims("alice")), auth.ReasonSignature},
		{"RS256 unknown kid", rsaTok("k2", f.claims("alice")), auth.ReasonUnknownKey},
		{"RS256 expired", rsaTok("k1", edit(func(c *auth.Claims) { c.ExpiresAt = jwt.NewNumericDate(past) })), auth.ReasonExpired},
	}
	for _, e := range f.endpoints() {
		for _, b := range bad {
			req := e.request(b.token)
			resp, body := doRequest(t, f.h, req)
			name := e.method + " " + e.path + " with " + b.name
			if resp.StatusCode != http.StatusUnauthorized || errorCode(body) != "unauthorized" {
				t.Errorf("%s: %d %s, want 401 unauthorized", name, resp.StatusCode, body)
				continue
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer realm="vstream-gateway"`) || (b.token != "") != strings.Contains(ch, "invalid_token") {
				t.Errorf("%s: WWW-Authenticate %q", name, ch)
			}
		}
	}

	// A valid RS256 token from the JWKS works like an HS256 one.
	req := endpoint{method: "GET", path: "/v1/streams"}.request(rsaTok("k1", f.claims("alice")))
	if resp, body := doRequest(t, f.h, req); resp.StatusCode != 200 {
		t.Errorf("RS256 token: %d %s", resp.StatusCode, body)
	}
}

// TestScopeMatrix: valid tokens whose claims do not cover the request get
// 403; the same requests with the right claims get past authorization.
func TestScopeMatrix(t *testing.T) {
	f := newAuthFixture(t)
	admin := f.mint(t, "ops", func(c *auth.Claims) { c.Scope = "read admin" })
	reader := f.mint(t, "alice", nil)
	otherStream := f.mint(t, "alice", func(c *auth.Claims) { c.Streams = []string{"orders-*"} })
	noStreams := f.mint(t, "alice", func(c *auth.Claims) { c.Streams = nil })
	bob := f.mint(t, "bob", nil)

	for _, e := range f.endpoints() {
		name := e.method + " " + e.path
		check := func(who, token string, forbidden bool) {
			t.Helper()
			resp, body := doRequest(t, f.h, e.request(token))
			if forbidden != (resp.StatusCode == http.StatusForbidden) {
				t.Errorf("%s as %s: %d %s (forbidden expected: %v)", name, who, resp.StatusCode, body, forbidden)
			}
			if resp.StatusCode == http.StatusForbidden && errorCode(body) != "forbidden" {
				t.Errorf("%s as %s: code %s", name, who, errorCode(body))
			}
		}
		perStream := strings.HasPrefix(e.path, "/v1/streams/")
		perSubscriber := strings.Contains(e.path, "/subscribers/")
		check("admin", admin, false)
		check("reader", reader, e.admin)
		check("reader of other streams", otherStream, e.admin || perStream)
		check("token without streams", noStreams, e.admin || perStream)
		check("bob on alice's subscriber", bob, e.admin || perSubscriber)
	}

	// Subscriber names bound to sub: alice.mobile is alice's, bob.x is not.
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/v1/streams/customers/changes?subscriber=alice.mobile&cursor=garbage", 400},
		{"/v1/streams/customers/changes?subscriber=bob&cursor=garbage", 403},
		{"/v1/streams/customers/sse?subscriber=alicex&cursor=garbage", 403},
		{"/v1/streams/customers/subscribers/alice.mobile", 404},
		{"/v1/streams/customers/subscribers/bob.alice", 403},
	} {
		resp, body := doRequest(t, f.h, endpoint{method: "GET", path: c.path}.request(reader))
		if resp.StatusCode != c.status {
			t.Errorf("alice GET %s: %d %s, want %d", c.path, resp.StatusCode, body, c.status)
		}
	}

	// An admin reads data only per its streams claim.
	adminNoStreams := f.mint(t, "ops", func(c *auth.Claims) { c.Scope = "admin"; c.Streams = nil })
	resp, _ := doRequest(t, f.h, endpoint{method: "GET", path: "/v1/streams/customers/changes"}.request(adminNoStreams))
	if resp.StatusCode != 403 {
		t.Errorf("admin without streams reading changes: %d", resp.StatusCode)
	}
	resp, _ = doRequest(t, f.h, endpoint{method: "GET", path: "/v1/streams/customers"}.request(adminNoStreams))
	if resp.StatusCode != 200 {
		t.Errorf("admin without streams reading the definition: %d", resp.StatusCode)
	}

	// Listing shows only the streams a token may read.
	for token, want := range map[string]string{reader: `"customers"`, otherStream: `{"streams":[]}`} {
		_, body := doRequest(t, f.h, endpoint{method: "GET", path: "/v1/streams"}.request(token))
		if !strings.Contains(string(body), want) {
			t.Errorf("list: %s, want %s", body, want)
		}
	}
}

// TestPublicEndpoints: health, the spec, metrics and the dashboard need no
// token; /metrics does with --metrics-auth.
func TestPublicEndpoints(t *testing.T) {
	f := newAuthFixture(t)
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/metrics"} {
		resp, body := doRequest(t, f.h, httptest.NewRequest("GET", path, nil))
		if resp.StatusCode != 200 {
			t.Errorf("GET %s without a token: %d %s", path, resp.StatusCode, truncate(body, 200))
		}
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Errorf("GET / without a token: %d", rec.Code)
	}

	f.authn.metricsAuth = true
	resp, _ := doRequest(t, f.h, httptest.NewRequest("GET", "/metrics", nil))
	if resp.StatusCode != 401 {
		t.Errorf("/metrics with --metrics-auth and no token: %d", resp.StatusCode)
	}
	for token, want := range map[string]int{
		f.mint(t, "alice", nil): 403,
		f.mint(t, "prom", func(c *auth.Claims) { c.Scope = "metrics" }): 200,
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, _ := doRequest(t, f.h, req); resp.StatusCode != want {
			t.Errorf("/metrics with --metrics-auth: %d, want %d", resp.StatusCode, want)
		}
	}
}

// TestTokenSources: the access_token query parameter and the WebSocket
// subprotocol carry a token like the header does.
func TestTokenSources(t *testing.T) {
	f := newAuthFixture(t)
	tok := f.mint(t, "alice", nil)
	req := httptest.NewRequest("GET", "/v1/streams?access_token="+tok, nil)
	if resp, body := doRequest(t, f.h, req); resp.StatusCode != 200 {
		t.Errorf("access_token: %d %s", resp.StatusCode, body)
	}
	req = httptest.NewRequest("GET", "/v1/streams/customers/ws?cursor=garbage", nil)
	wsHandshake(req)
	req.Header.Set("Sec-WebSocket-Protocol", "vsg.v1, bearer."+tok)
	if resp, body := doRequest(t, f.h, req); resp.StatusCode != 400 || errorCode(body) != "invalid_cursor" {
		t.Errorf("subprotocol token: %d %s, want past auth to invalid_cursor", resp.StatusCode, body)
	}
}
