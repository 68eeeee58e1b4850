package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vitess.io/vitess/go/sqltypes"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
)

// newFakeVtgateServer is the whole gateway (server.New, as the binary
// builds it) on an embedded store, with fake as its vtgate.
func newFakeVtgateServer(t *testing.T, fake *fakevtgate.Server) http.Handler {
	t.Helper()
	cfg, err := ParseFlags([]string{"--insecure-no-auth", "--vtgate", fake.Addr, "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--allow-private-webhooks", "--max-conns-per-token", "0"}, env())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeBackends)
	return s.Handler()
}

// apiError is an error response as clients read it.
type apiError struct {
	Error struct{ Code, Message string } `json:"error"`
}

// Every endpoint that asks vtgate something for the client answers what
// vtgate's answer means: the caller's mistake (unknown keyspace, table or
// column) is a 400 naming it; vtgate unreachable a 503 with Retry-After;
// vtgate refusing a 502. Never a 500. Each answer matches openapi.yaml.
func TestUpstreamErrorStatuses(t *testing.T) {
	loadSpec(t)
	defer func(d time.Duration) { checkTimeout = d }(checkTimeout)
	checkTimeout = 500 * time.Millisecond

	fake := fakevtgate.New(t)
	keyspaces := sqltypes.MakeTestResult(sqltypes.MakeTestFields("Databases", "varchar"), "commerce", "customer")
	fake.SetResult("show vitess_keyspaces", keyspaces)
	fake.SetResult("select * from `customer` limit 0", sqltypes.MakeTestResult(sqltypes.MakeTestFields("customer_id|email", "int64|varchar")))
	fake.SetError("select * from `nosuch` limit 0", vterrors.Errorf(vtrpcpb.Code_UNKNOWN, "table nosuch not found"))
	fake.SetResult("select * from `product` limit 0", sqltypes.MakeTestResult(sqltypes.MakeTestFields("sku", "varbinary")))
	fake.SetError("select * from `gone` limit 0", vterrors.Errorf(vtrpcpb.Code_NOT_FOUND,
		"target: commerce.0.primary: vttablet: rpc error: code = NotFound desc = Table 'vt_commerce.gone' doesn't exist (errno 1146) (sqlstate 42S02)"))
	h := newFakeVtgateServer(t, fake)

	type probe struct {
		name, method, target, body string
		status                     int
		code                       string
		mentions                   string // the message names it
		timeout                    time.Duration
	}
	do := func(p probe) {
		t.Helper()
		ctx := context.Background()
		if p.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, p.timeout)
			defer cancel()
		}
		req := httptest.NewRequestWithContext(ctx, p.method, p.target, strings.NewReader(p.body))
		if strings.HasSuffix(p.target, "/ws") {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		start := time.Now()
		resp, body := doRequest(t, h, req)
		took := time.Since(start)
		if resp.StatusCode != p.status {
			t.Errorf("%s: %d %s, want %d", p.name, resp.StatusCode, body, p.status)
			return
		}
		if p.code == "" {
			return
		}
		var e apiError
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != p.code {
			t.Errorf("%s: body %s, want code %s", p.name, body, p.code)
		}
		if !strings.Contains(e.Error.Message, p.mentions) {
			t.Errorf("%s: message %q does not name %s", p.name, e.Error.Message, p.mentions)
		}
		if p.status == http.StatusServiceUnavailable {
			if ra := resp.Header.Get("Retry-After"); ra != "5" {
				t.Errorf("%s: Retry-After %q", p.name, ra)
			}
			if took > 5*time.Second {
				t.Errorf("%s: the 503 took %v", p.name, took)
			}
		}
	}

	create := func(def string) string { return def }
	for _, p := range []probe{
		{name: "unknown keyspace", method: "POST", target: "/v1/streams", body: create(`{"name":"a","keyspace":"nosuch","tables":["customer"]}`),
			status: 400, code: "invalid_stream", mentions: `keyspace "nosuch"`},
		{name: "unknown keyspace, regex rules only", method: "POST", target: "/v1/streams", body: `{"name":"a","keyspace":"nosuch","rules":[{"match":"/.*/"}]}`,
			status: 400, code: "invalid_stream", mentions: `keyspace "nosuch"`},
		{name: "unknown table, sharded keyspace", method: "POST", target: "/v1/streams", body: `{"name":"a","keyspace":"customer","tables":["customer","nosuch"]}`,
			status: 400, code: "invalid_stream", mentions: `tables[1]: table "nosuch" does not exist in keyspace "customer"`},
		{name: "unknown table, unsharded keyspace", method: "POST", target: "/v1/streams", body: `{"name":"a","keyspace":"commerce","rules":[{"match":"gone"}]}`,
			status: 400, code: "invalid_stream", mentions: `rules[0]: table "gone"`},
		{name: "unknown column", method: "POST", target: "/v1/streams", body: `{"name":"a","keyspace":"customer","rules":[{"match":"customer","filter":"select customer_id, nope from customer"}]}`,
			status: 400, code: "invalid_stream", mentions: `column "nope"`},
		{name: "valid", method: "POST", target: "/v1/streams", body: `{"name":"customers","keyspace":"customer","tables":["customer"]}`, status: 201},
	} {
		do(p)
	}

	// vtgate refuses (here: the gateway's credentials).
	fake.SetError("show vitess_keyspaces", vterrors.Errorf(vtrpcpb.Code_PERMISSION_DENIED, "User 'vsg' is not authorized"))
	do(probe{name: "vtgate refuses", method: "POST", target: "/v1/streams", body: `{"name":"b","keyspace":"customer","tables":["customer"]}`,
		status: 502, code: "upstream_failed", mentions: "not authorized"})
	fake.SetError("show vitess_keyspaces", nil)

	// vtgate down: the check, and every reader that needs vtgate to tell
	// where "now" is, answer 503 with Retry-After. (Readers with a cursor
	// need nothing from vtgate to start: they wait for it, see the e2e
	// fault tests.)
	fake.Down()
	for _, p := range []probe{
		{name: "create while vtgate is down", method: "POST", target: "/v1/streams", body: `{"name":"c","keyspace":"customer","tables":["customer"]}`,
			status: 503, code: "upstream_unavailable", mentions: "vtgate"},
		{name: "pull while vtgate is down", method: "GET", target: "/v1/streams/customers/changes", timeout: time.Second,
			status: 503, code: "upstream_unavailable", mentions: "vtgate"},
		{name: "SSE while vtgate is down", method: "GET", target: "/v1/streams/customers/sse", timeout: time.Second,
			status: 503, code: "upstream_unavailable", mentions: "vtgate"},
		{name: "WebSocket while vtgate is down", method: "GET", target: "/v1/streams/customers/ws", timeout: time.Second,
			status: 503, code: "upstream_unavailable", mentions: "vtgate"},
		{name: "webhook while vtgate is down", method: "POST", target: "/v1/streams/customers/webhooks", body: `{"url":"http://127.0.0.1:9/hook"}`, timeout: time.Second,
			status: 503, code: "upstream_unavailable", mentions: "vtgate"},
	} {
		do(p)
	}
}
