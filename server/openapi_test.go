package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	vsg "github.com/vstream-gateway/vstream-gateway"
	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// newTestServer assembles the gateway's HTTP side over an embedded store,
// without vtgate: the hub has no opener, so a request must never get as far
// as opening a subscription. Every request these tests make fails or
// succeeds before that point.
func newTestServer(t *testing.T) (*Server, *cursor.Codec) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	codec, err := cursor.NewCodec([]byte("openapi-test-signing-key"), refStore{st})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := hub.New(nil, codec, st, hub.WithLogger(log))
	t.Cleanup(h.Close)
	s := &Server{log: log, store: st, hub: h}
	s.api = &handlers.API{
		Streams: streams.NewRegistry(st, nil),
		Hub:     h,
		Cursors: hub.NewCursors(st),
		Store:   st,
		Log:     log,
		Limits:  handlers.DefaultLimits(),
		Ready:   st.Ping,
	}
	return s, codec
}

// testVGtid is a position on two shards of keyspace customer.
func testVGtid() *binlogdatapb.VGtid {
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{
		{Keyspace: "customer", Shard: "-80", Gtid: "MariaDB/0-1914418711-61"},
		{Keyspace: "customer", Shard: "80-", Gtid: "MariaDB/0-1914418712-40"},
	}}
}

func TestOpenAPIDocument(t *testing.T) {
	doc, _ := loadSpec(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi: %s, want 3.1.x (kin-openapi validates 3.1 with JSON Schema 2020-12)", doc.OpenAPI)
	}

	// Every route the router serves is documented, and nothing else is.
	s, _ := newTestServer(t)
	var served []string
	err := chi.Walk(s.Router().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route != "/" {
			route = strings.TrimSuffix(route, "/")
		}
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.yaml", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.yaml documents %s, which the router does not serve", r)
		}
	}

	// The binary serves exactly the embedded file.
	req := httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil)
	_, body := doRequest(t, s.Router(), req)
	if !bytes.Equal(body, vsg.OpenAPI) {
		t.Error("GET /openapi.yaml does not serve the embedded openapi.yaml")
	}
}

// TestOpenAPICheckRejects makes sure the response check has teeth: real
// encoder output passes, and each kind of drift from the spec is caught.
func TestOpenAPICheckRejects(t *testing.T) {
	loadSpec(t)
	ctx := context.Background()
	codec, err := cursor.NewCodec([]byte("openapi-test-signing-key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := codec.Encode(ctx, "customers", testVGtid())
	if err != nil {
		t.Fatal(err)
	}

	// Change events as the encoder writes them.
	tbl, err := event.NewTable("customer", "-80", &binlogdatapb.FieldEvent{
		TableName: "customer",
		Fields: []*querypb.Field{
			{Name: "customer_id", Type: querypb.Type_INT64, Flags: uint32(querypb.MySqlFlag_PRI_KEY_FLAG)},
			{Name: "email", Type: querypb.Type_VARCHAR, Charset: 45},
			{Name: "balance", Type: querypb.Type_DECIMAL},
			{Name: "tags", Type: querypb.Type_SET, Charset: 45},
		},
	}, event.Options{})
	if err != nil {
		t.Fatal(err)
	}
	row := func(vals ...string) *querypb.Row {
		r := &querypb.Row{}
		for _, v := range vals {
			r.Lengths = append(r.Lengths, int64(len(v)))
			r.Values = append(r.Values, v...)
		}
		return r
	}
	r1, r2 := row("5", "a@b.c", "1.50", "x,y"), row("5", "new@b.c", "2.00", "")
	var events [][]byte
	for _, c := range []struct {
		op event.Op
		rc *binlogdatapb.RowChange
		ts int64
	}{
		{event.OpInsert, &binlogdatapb.RowChange{After: r1}, 1796223662},
		{event.OpUpdate, &binlogdatapb.RowChange{Before: r1, After: r2}, 1796223662},
		{event.OpDelete, &binlogdatapb.RowChange{Before: r2}, 1796223663},
		{event.OpSnapshot, &binlogdatapb.RowChange{After: r1}, 0},
	} {
		e, err := tbl.Encode(c.op, c.rc, c.ts)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e.AppendJSON(nil, tok))
	}
	// Control events, shaped as source's control() writes them.
	for _, m := range []map[string]any{
		{"type": "reshard", "keyspace": "customer", "from": []string{"0"}, "to": []string{"-80", "80-"}, "journal_id": "8812612309"},
		{"type": "snapshot_complete", "keyspace": "customer"},
		{"type": "ddl", "keyspace": "customer", "shard": "-80", "statement": "alter table customer add column phone varchar(32)"},
		{"type": "resync", "keyspace": "customer"},
		{"type": "heartbeat"},
	} {
		m["cursor"] = tok
		b, _ := json.Marshal(m)
		events = append(events, b)
	}
	batch := func(evs [][]byte) []byte {
		return []byte(`{"events":[` + string(bytes.Join(evs, []byte(","))) + `],"next_cursor":"` + tok + `","up_to_date":true}`)
	}
	jsonHeader := func(extra ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	pullHeaders := func(ct string) http.Header {
		return http.Header{"Content-Type": {ct}, "Vsg-Next-Cursor": {tok}, "Vsg-Up-To-Date": {"true"}, "Cache-Control": {"no-store"}}
	}
	changes := httptest.NewRequest(http.MethodGet, "/v1/streams/customers/changes?cursor="+tok, nil)
	badCommitTS := bytes.Replace(events[0], []byte(`"commit_ts":"2026-12-02T15:01:02Z"`), []byte(`"commit_ts":5`), 1)
	if bytes.Equal(badCommitTS, events[0]) {
		t.Fatalf("encoder output changed shape: %s", events[0])
	}

	cases := []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   []byte
		ok     bool
	}{
		{"real events", changes, 200, pullHeaders("application/json"), batch(events), true},
		{"real events as NDJSON", changes, 200, pullHeaders("application/x-ndjson"), ndjson(events...), true},
		{"empty NDJSON batch", changes, 200, pullHeaders("application/x-ndjson"), nil, true},
		{"commit_ts not a string", changes, 200, pullHeaders("application/json"), batch([][]byte{badCommitTS}), false},
		{"NDJSON line off-spec", changes, 200, pullHeaders("application/x-ndjson"), ndjson(events[0], badCommitTS), false},
		{"unknown event type", changes, 200, pullHeaders("application/json"), batch([][]byte{[]byte(`{"type":"gossip","cursor":"` + tok + `"}`)}), false},
		{"missing next-cursor header", changes, 200, jsonHeader("Vsg-Up-To-Date", "true"), batch(events), false},
		{"undocumented error code", changes, 400, jsonHeader(), []byte(`{"error":{"code":"stream_exists","message":"x"}}`), false},
		{"error without message", changes, 404, jsonHeader(), []byte(`{"error":{"code":"stream_not_found"}}`), false},
		{"undocumented status", changes, 418, jsonHeader(), []byte(`{"error":{"code":"teapot","message":"x"}}`), false},
		{"plain-text error", changes, 404, http.Header{"Content-Type": {"text/plain"}}, []byte("404 page not found\n"), false},
		{"unknown /v1 path", httptest.NewRequest(http.MethodGet, "/v1/nope", nil), 404, jsonHeader(), []byte(`{"error":{"code":"not_found","message":"no such endpoint"}}`), true},
		{"unknown /v1 path, wrong code", httptest.NewRequest(http.MethodGet, "/v1/nope", nil), 404, jsonHeader(), []byte(`{"error":{"code":"stream_not_found","message":"x"}}`), false},
		{"wrong method", httptest.NewRequest(http.MethodPut, "/v1/streams", nil), 405, jsonHeader(), []byte(`{"error":{"code":"method_not_allowed","message":"PUT is not allowed here"}}`), true},
	}
	for _, c := range cases {
		err := checkResponse(c.req, c.status, c.header, c.body)
		if c.ok && err != nil {
			t.Errorf("%s: rejected: %v", c.name, err)
		}
		if !c.ok && err == nil {
			t.Errorf("%s: accepted, want a mismatch", c.name)
		}
	}

	// The push-only messages have schemas too.
	doc, _ := loadSpec(t)
	for name, msg := range map[string]string{
		"HeartbeatEvent": `{"type":"heartbeat","cursor":"` + tok + `"}`,
		"Disconnect":     `{"type":"disconnect","code":4008,"reason":"slow_consumer","message":"send queue overflowed; resume from cursor","cursor":"` + tok + `"}`,
		"SSEError":       `{"type":"error","code":"upstream_failed","message":"vtgate went away","cursor":"` + tok + `"}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(msg), &v); err != nil {
			t.Fatal(err)
		}
		if err := doc.Components.Schemas[name].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func ndjson(lines ...[]byte) []byte {
	var b []byte
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

// TestAPIMatchesOpenAPI drives the real router and handlers through every
// response that needs no vtgate, and checks each against the spec: status,
// headers, body schema and, for errors, the code.
func TestAPIMatchesOpenAPI(t *testing.T) {
	loadSpec(t)
	s, codec := newTestServer(t)
	h := s.Router()
	ctx := context.Background()
	tok, err := codec.Encode(ctx, "customers", testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := codec.Encode(ctx, "orders", testVGtid())
	if err != nil {
		t.Fatal(err)
	}

	type step struct {
		method, target, body string
		header               map[string]string
		status               int
		code                 string // error code expected; "" for success
	}
	const (
		valid   = `{"name":"customers","keyspace":"customer","tables":["customer","corder"]}`
		withRul = `{"name":"orders","keyspace":"customer","rules":[{"match":"corder","filter":"select order_id, price from corder where price > 1000"},{"match":"/^cust/"}],"start":"snapshot","on_gap":"fail"}`
	)
	steps := []step{
		{method: "GET", target: "/healthz", status: 200},
		{method: "GET", target: "/readyz", status: 200},
		{method: "GET", target: "/v1/streams", status: 200},

		// Create: valid, duplicate, and each way a body can be wrong.
		{method: "POST", target: "/v1/streams", body: valid, status: 201},
		{method: "POST", target: "/v1/streams", body: withRul, status: 201},
		{method: "POST", target: "/v1/streams", body: valid, status: 409, code: "stream_exists"},
		{method: "POST", target: "/v1/streams", body: ``, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams", body: `{"name":`, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams", body: `{"name":"x","keyspace":"customer","tables":["t"],"colour":"red"}`, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams", body: valid + `{}`, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams", body: `[]`, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams", body: `{"name":"x","keyspace":"no-dashes","tables":["t"]}`, status: 400, code: "invalid_stream"},
		{method: "POST", target: "/v1/streams", body: `{"name":"-x","keyspace":"customer","tables":["t"]}`, status: 400, code: "invalid_stream"},
		{method: "POST", target: "/v1/streams", body: `{"name":"x","keyspace":"customer"}`, status: 400, code: "invalid_stream"},
		{method: "POST", target: "/v1/streams", body: `{"name":"x","keyspace":"customer","tables":["t"],"start":"yesterday"}`, status: 400, code: "invalid_stream"},
		{method: "POST", target: "/v1/streams", body: `{"name":"x","keyspace":"customer","rules":[{"match":"t","filter":"select * from t where a = -1"}]}`, status: 400, code: "invalid_stream"},
		{method: "POST", target: "/v1/streams", body: `{"name":"x","keyspace":"customer","tables":["t"],"pad":"` + strings.Repeat("x", 65<<10) + `"}`, status: 413, code: "body_too_large"},

		// Read and list.
		{method: "GET", target: "/v1/streams", status: 200},
		{method: "GET", target: "/v1/streams/customers", status: 200},
		{method: "GET", target: "/v1/streams/nope", status: 404, code: "stream_not_found"},

		// Pull: parameter errors come before any subscription.
		{method: "GET", target: "/v1/streams/nope/changes", status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers/changes?limit=0", status: 400, code: "invalid_limit"},
		{method: "GET", target: "/v1/streams/customers/changes?limit=ten", status: 400, code: "invalid_limit"},
		{method: "GET", target: "/v1/streams/customers/changes?wait=soon", status: 400, code: "invalid_wait"},
		{method: "GET", target: "/v1/streams/customers/changes?wait=-1s", status: 400, code: "invalid_wait"},
		{method: "GET", target: "/v1/streams/customers/changes?wait=-3", status: 400, code: "invalid_wait"},
		{method: "GET", target: "/v1/streams/customers/changes?subscriber=-bad", status: 400, code: "invalid_subscriber"},
		{method: "GET", target: "/v1/streams/customers/changes?cursor=garbage", status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/changes?cursor=" + otherTok, status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/changes?cursor=" + tok[:len(tok)-2], header: map[string]string{"Accept": "application/x-ndjson"}, status: 400, code: "invalid_cursor"},

		// SSE and WebSocket: the same checks before streaming starts.
		{method: "GET", target: "/v1/streams/nope/sse", status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers/sse?cursor=garbage", status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/sse?cursor=" + tok, header: map[string]string{"Last-Event-ID": "garbage"}, status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/sse?subscriber=bad%20name", status: 400, code: "invalid_subscriber"},
		{method: "GET", target: "/v1/streams/nope/ws", status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers/ws?cursor=" + otherTok, status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/ws?subscriber=" + strings.Repeat("s", 65), status: 400, code: "invalid_subscriber"},
		{method: "GET", target: "/v1/streams/customers/ws?cursor=" + tok, status: 426},

		// Subscribers: ack creates, get reads, delete forgets.
		{method: "GET", target: "/v1/streams/customers/subscribers/app", status: 404, code: "subscriber_not_found"},
		{method: "GET", target: "/v1/streams/nope/subscribers/app", status: 404, code: "stream_not_found"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + tok + `"}`, status: 200},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + tok + `"}`, status: 200},
		{method: "GET", target: "/v1/streams/customers/subscribers/app", status: 200},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"garbage"}`, status: 400, code: "invalid_cursor"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + otherTok + `"}`, status: 400, code: "invalid_cursor"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{}`, status: 400, code: "invalid_cursor"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + tok + `","extra":1}`, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: ``, status: 400, code: "invalid_body"},
		{method: "POST", target: "/v1/streams/customers/subscribers/.bad/ack", body: `{"cursor":"` + tok + `"}`, status: 400, code: "invalid_subscriber"},
		{method: "POST", target: "/v1/streams/nope/subscribers/app/ack", body: `{"cursor":"` + tok + `"}`, status: 404, code: "stream_not_found"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + strings.Repeat("1", 65<<10) + `"}`, status: 413, code: "body_too_large"},
		{method: "DELETE", target: "/v1/streams/customers/subscribers/app", status: 204},
		{method: "DELETE", target: "/v1/streams/customers/subscribers/app", status: 204},
		{method: "GET", target: "/v1/streams/customers/subscribers/app", status: 404, code: "subscriber_not_found"},
		{method: "DELETE", target: "/v1/streams/nope/subscribers/app", status: 404, code: "stream_not_found"},

		// Router fallbacks.
		{method: "GET", target: "/v1/nope", status: 404, code: "not_found"},
		{method: "GET", target: "/v1/streams/customers/nope", status: 404, code: "not_found"},
		{method: "PUT", target: "/v1/streams", body: valid, status: 405, code: "method_not_allowed"},
		{method: "POST", target: "/v1/streams/customers", body: valid, status: 405, code: "method_not_allowed"},
		{method: "PATCH", target: "/v1/streams/customers/changes", status: 405, code: "method_not_allowed"},

		// Delete.
		{method: "DELETE", target: "/v1/streams/customers", status: 204},
		{method: "DELETE", target: "/v1/streams/customers", status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers", status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers/changes", status: 404, code: "stream_not_found"},
	}
	for _, st := range steps {
		var body io.Reader
		if st.body != "" {
			body = strings.NewReader(st.body)
		}
		req := httptest.NewRequest(st.method, st.target, body)
		if st.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range st.header {
			req.Header.Set(k, v)
		}
		name := st.method + " " + truncateString(st.target, 80)
		resp, got := doRequest(t, h, req)
		if resp.StatusCode != st.status {
			t.Errorf("%s: status %d, want %d: %s", name, resp.StatusCode, st.status, truncate(got, 300))
			continue
		}
		if st.code != "" {
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(got, &e); err != nil || e.Error.Code != st.code || e.Error.Message == "" {
				t.Errorf("%s: body %s, want error code %s with a message", name, truncate(got, 300), st.code)
			}
		}
	}

	// What was created reads back as created, with defaults filled in.
	req := httptest.NewRequest(http.MethodGet, "/v1/streams", nil)
	_, got := doRequest(t, h, req)
	var list struct{ Streams []streams.Definition }
	if err := json.Unmarshal(got, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Streams) != 1 || list.Streams[0].Name != "orders" || list.Streams[0].Start != "snapshot" ||
		list.Streams[0].OnGap != "fail" || len(list.Streams[0].Rules) != 2 || list.Streams[0].CreatedAt.IsZero() {
		t.Errorf("GET /v1/streams after the steps: %s", got)
	}
}

func truncateString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
