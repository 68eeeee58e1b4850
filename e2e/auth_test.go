package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
)

// authGateway is a gateway with authentication on: HS256 with a random
// secret, audience and issuer checked.
type authGateway struct {
	*gateway
	secret []byte
}

func startAuthGateway(t *testing.T) *authGateway {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	secret := []byte(hex.EncodeToString(b))
	g := startGateway(t, append(withDataDir(t), "--jwt-secret", string(secret), "--jwt-audience", "vsg-e2e", "--jwt-issuer", "e2e")...)
	return &authGateway{gateway: g, secret: secret}
}

func (g *authGateway) claims(sub string, streams, tables []string, scope string) *auth.Claims {
	now := time.Now()
	return &auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: sub, Audience: jwt.ClaimStrings{"vsg-e2e"}, Issuer: "e2e",
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)},
		Streams: streams, Tables: tables, Scope: scope,
	}
}

func (g *authGateway) sign(t *testing.T, c *auth.Claims, key []byte) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (g *authGateway) token(t *testing.T, sub string, streams, tables []string, scope string) string {
	return g.sign(t, g.claims(sub, streams, tables, scope), g.secret)
}

// call sends one request with token as a Bearer header and returns the
// status and body.
func (g *authGateway) call(ctx context.Context, method, path, token, body string, header map[string]string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestAuthRefusals runs the token matrix against every endpoint of a real
// gateway: forged, expired, misdirected, wrong-algorithm and out-of-scope
// tokens are each refused with the right status.
func TestAuthRefusals(t *testing.T) {
	needE2E(t)
	g := startAuthGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream := fmt.Sprintf("auth-refusals-%d", time.Now().UnixNano()%1e6)
	createAuthStream(t, ctx, g, stream)

	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	base := func() *auth.Claims { return g.claims("alice", []string{stream}, []string{"*"}, "") }
	edit := func(f func(c *auth.Claims)) *auth.Claims { c := base(); f(c); return c }
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, base()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	rs256, _ := jwt.NewWithClaims(jwt.SigningMethodRS256, base()).SignedString(rsaKey)
	refused := map[string]string{
		"missing":                            "",
		"forged":                             g.sign(t, base(), []byte("forged-secret-forged-secret-0123456789")),
		"expired":                            g.sign(t, edit(func(c *auth.Claims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour)) }), g.secret),
		"wrong audience":                     g.sign(t, edit(func(c *auth.Claims) { c.Audience = jwt.ClaimStrings{"someone-else"} }), g.secret),
		"wrong issuer":                       g.sign(t, edit(func(c *auth.Claims) { c.Issuer = "evil" }), g.secret),
		"alg none":                           none,
		"RS256 (no JWKS)":                    rs256,
		"HS256 keyed with an RSA public key": g.sign(t, base(), pubPEM),
	}
	reader := g.token(t, "alice", []string{stream}, []string{"*"}, "")
	otherStreams := g.token(t, "alice", []string{"orders-*"}, []string{"*"}, "")
	bob := g.token(t, "bob", []string{stream}, []string{"*"}, "")
	p := "/v1/streams/" + stream
	endpoints := []struct {
		method, path, body string
		adminOnly          bool
	}{
		{"POST", "/v1/streams", `{"name":"x-` + stream + `","keyspace":"customer","tables":["customer"]}`, true},
		{"GET", "/v1/streams", "", false},
		{"GET", p, "", false},
		{"DELETE", "/v1/streams/no-such-stream", "", true},
		{"GET", p + "/changes?cursor=garbage", "", false},
		{"GET", p + "/sse?cursor=garbage", "", false},
		{"GET", p + "/ws?cursor=garbage", "", false},
		{"GET", p + "/subscribers/alice", "", false},
		{"DELETE", p + "/subscribers/alice", "", true},
		{"POST", p + "/subscribers/alice/ack", `{"cursor":"garbage"}`, false},
	}
	for _, e := range endpoints {
		for name, tok := range refused {
			st, b, err := g.call(ctx, e.method, e.path, tok, e.body, nil)
			if err != nil || st != http.StatusUnauthorized || !bytes.Contains(b, []byte(`"unauthorized"`)) {
				t.Errorf("%s %s with %s token: %d %s %v, want 401", e.method, e.path, name, st, b, err)
			}
		}
		check := func(who, tok string, want403 bool) {
			st, b, err := g.call(ctx, e.method, e.path, tok, e.body, nil)
			if err != nil || (st == http.StatusForbidden) != want403 || (st == http.StatusUnauthorized) {
				t.Errorf("%s %s as %s: %d %s %v (403 expected: %v)", e.method, e.path, who, st, b, err, want403)
			}
		}
		perStream := strings.HasPrefix(e.path, p)
		check("reader", reader, e.adminOnly)
		check("reader of other streams", otherStreams, e.adminOnly || perStream)
		check("bob (alice's subscriber)", bob, e.adminOnly || strings.Contains(e.path, "/subscribers/alice"))
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/metrics", "/"} {
		if st, _, err := g.call(ctx, "GET", path, "", "", nil); err != nil || st != 200 {
			t.Errorf("public %s: %d %v", path, st, err)
		}
	}
	_, metrics, _ := g.call(ctx, "GET", "/metrics", "", "", nil)
	for _, want := range []string{`vsg_auth_failures_total{reason="expired"}`, `vsg_auth_failures_total{reason="algorithm"}`, `vsg_requests_refused_total{reason="forbidden"}`} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestAuthTableScope: a token scoped to customer.customer never receives a
// corder event in any transport, even from transactions that change both
// tables, while a token for every table does.
func TestAuthTableScope(t *testing.T) {
	needE2E(t)
	g := startAuthGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream := fmt.Sprintf("auth-tables-%d", time.Now().UnixNano()%1e6)
	createAuthStream(t, ctx, g, stream)
	scoped := g.token(t, "alice", []string{stream}, []string{"customer.customer"}, "")
	full := g.token(t, "carol", []string{stream}, []string{"customer.*"}, "")

	// The current position, before any of this test's writes.
	var start string
	eventually(t, 30*time.Second, "the stream's start cursor", func() error {
		st, b, err := g.call(ctx, "GET", "/v1/streams/"+stream+"/changes", full, "", nil)
		if err != nil || st != 200 {
			return fmt.Errorf("%d %s %v", st, b, err)
		}
		var out struct {
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &out); err != nil || out.NextCursor == "" {
			return fmt.Errorf("no next_cursor in %s (%v)", b, err)
		}
		start = out.NextCursor
		return nil
	})

	// Push clients connect first, from the start cursor.
	sse, err := openSSE(ctx, g, stream, scoped, start)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Close()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/streams/"+stream+"/ws?cursor="+url.QueryEscape(start),
		&websocket.DialOptions{Subprotocols: []string{"vsg.v1", "bearer." + scoped}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	if ws.Subprotocol() != "vsg.v1" {
		t.Errorf("subprotocol %q", ws.Subprotocol())
	}

	// Writes: orders alone, customers alone, and mixed transactions.
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tag := fmt.Sprintf("scope-%d", time.Now().UnixNano())
	for i := 0; i < 5; i++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "insert into corder(customer_id, sku, price) values (?, ?, ?)", i, tag, 100+i); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := tx.ExecContext(ctx, "insert into customer(email) values (?)", fmt.Sprintf("%s-%d@e2e", tag, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	sentinel := tag + "-end@e2e"
	if _, err := db.ExecContext(ctx, "insert into customer(email) values (?)", sentinel); err != nil {
		t.Fatal(err)
	}

	// Rows of different shards interleave, so a read ends when everything
	// expected has arrived, not at the sentinel.
	counts := func(events []ev) (customers, orders int) {
		for _, e := range events {
			switch e.Table {
			case "corder":
				orders++
			case "customer":
				if strings.HasPrefix(e.str("email"), tag) {
					customers++
				}
			}
		}
		return customers, orders
	}
	customersDone := func(events []ev) bool { c, _ := counts(events); return c >= 4 }
	allDone := func(events []ev) bool { c, o := counts(events); return c >= 4 && o >= 5 }
	check := func(transport string, events []ev, wantOrders bool) {
		t.Helper()
		customers, orders := counts(events)
		if customers != 4 {
			t.Errorf("%s: %d of this test's customers, want 4", transport, customers)
		}
		if wantOrders && orders < 5 {
			t.Errorf("%s: %d corder events with every table allowed, want 5", transport, orders)
		}
		if !wantOrders && orders > 0 {
			t.Errorf("%s: %d corder events sent to a token scoped to customer.customer", transport, orders)
		}
	}
	pulled, err := pullUntil(ctx, g, stream, scoped, start, customersDone)
	if err != nil {
		t.Fatal(err)
	}
	check("pull", pulled, false)
	pulledAll, err := pullUntil(ctx, g, stream, full, start, allDone)
	if err != nil {
		t.Fatal(err)
	}
	check("pull (all tables)", pulledAll, true)
	sseEvents, err := readSSEUntil(ctx, sse, customersDone)
	if err != nil {
		t.Fatal(err)
	}
	check("sse", sseEvents, false)
	var wsEvents []ev
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("ws: %v", err)
		}
		e, err := parseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		wsEvents = append(wsEvents, e)
		if customersDone(wsEvents) {
			break
		}
	}
	check("ws", wsEvents, false)

	_, metrics, _ := g.call(ctx, "GET", "/metrics", "", "", nil)
	if !bytes.Contains(metrics, []byte(`vsg_events_filtered_total{stream="`+stream+`"`)) {
		t.Errorf("/metrics does not count filtered events for %s", stream)
	}
}

func pullUntil(ctx context.Context, g *authGateway, stream, token, cursor string, done func([]ev) bool) ([]ev, error) {
	var got []ev
	for {
		st, b, err := g.call(ctx, "GET", "/v1/streams/"+stream+"/changes?wait=5s&cursor="+url.QueryEscape(cursor), token, "", nil)
		if err != nil || st != 200 {
			return got, fmt.Errorf("pull: %d %s %v", st, b, err)
		}
		var out struct {
			Events     []json.RawMessage `json:"events"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return got, err
		}
		for _, raw := range out.Events {
			e, err := parseEvent(raw)
			if err != nil {
				return got, err
			}
			got = append(got, e)
		}
		if done(got) {
			return got, nil
		}
		cursor = out.NextCursor
	}
}

// openSSE connects as a browser's EventSource would: the token in the
// access_token query parameter.
func openSSE(ctx context.Context, g *authGateway, stream, token, cursor string) (io.ReadCloser, error) {
	q := url.Values{"access_token": {token}, "cursor": {cursor}}
	req, err := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/streams/"+stream+"/sse?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("sse: %d %s", resp.StatusCode, b)
	}
	return resp.Body, nil
}

func readSSEUntil(ctx context.Context, body io.Reader, done func([]ev) bool) ([]ev, error) {
	var got []ev
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if ctx.Err() != nil {
			return got, ctx.Err()
		}
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		e, err := parseEvent([]byte(line))
		if err != nil {
			return got, err
		}
		got = append(got, e)
		if done(got) {
			return got, nil
		}
	}
	return got, fmt.Errorf("sse ended: %v", sc.Err())
}

// createAuthStream creates a stream on customer and corder with an admin
// token.
func createAuthStream(t *testing.T, ctx context.Context, g *authGateway, stream string) {
	t.Helper()
	admin := g.token(t, "ops", []string{"*"}, []string{"*"}, "admin")
	if st, b, err := g.call(ctx, "POST", "/v1/streams", admin, `{"name":"`+stream+`","keyspace":"customer","tables":["customer","corder"]}`, nil); err != nil || st != 201 {
		t.Fatalf("create stream: %d %s %v", st, b, err)
	}
}
