package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	vsg "github.com/vstream-gateway/vstream-gateway"
	"github.com/vstream-gateway/vstream-gateway/bridge"
	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// newTestServer assembles the gateway's HTTP side over an embedded store
// and a vtgate address where nothing listens: subscriptions open (the
// client connects lazily) but never deliver anything, which is all the
// error paths, heartbeats and empty batches need.
func newTestServer(t testing.TB) (*Server, *cursor.Codec) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newTestServerOn(t, st)
}

// newTestServerOn is newTestServer on a given store.
func newTestServerOn(t testing.TB, st store.Store) (*Server, *cursor.Codec) {
	t.Helper()
	codec, err := cursor.NewCodec([]byte("openapi-test-signing-key"), refStore{st})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := source.Dial(context.Background(), deadAddr(t), source.WithLogger(log), source.WithMaxRetryWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	h, err := hub.New(src, codec, st, hub.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	b, err := bridge.New(h.Cursors(), st, src, bridge.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// Short waits keep the tests that reach a subscription quick.
	pull := handlers.DefaultPullConfig()
	pull.FirstWait = 100 * time.Millisecond
	sse := handlers.DefaultSSEConfig()
	sse.CursorHeartbeat = 100 * time.Millisecond
	ws := handlers.DefaultWebSocketConfig()
	ws.CursorHeartbeat = 100 * time.Millisecond
	s := &Server{log: log, store: st, src: src, hub: h, bridger: b}
	s.api = &handlers.API{
		Streams: streams.NewRegistry(st, nil),
		Hub:     h,
		Bridges: b,
		Cursors: hub.NewCursors(st),
		Store:   st,
		Log:     log,
		Ready:   st.Ping,

		AdminConfig:     handlers.DefaultAdminConfig(),
		PullConfig:      pull,
		SSEConfig:       sse,
		WebSocketConfig: ws,
	}
	return s, codec
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
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
	s, _ := newTestServer(t)
	h := s.Router()
	ctx := context.Background()
	tok, err := s.API().Hub.Token(ctx, &streams.Definition{Name: "customers", Keyspace: "customer"}, testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := s.API().Hub.Token(ctx, &streams.Definition{Name: "orders", Keyspace: "customer"}, testVGtid())
	if err != nil {
		t.Fatal(err)
	}

	type step struct {
		method, target, body string
		header               map[string]string
		ws                   bool // send a WebSocket handshake
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
		{method: "GET", target: "/v1/streams/customers/changes?start=yesterday", status: 400, code: "invalid_start"},
		{method: "GET", target: "/v1/streams/customers/sse?start=later", status: 400, code: "invalid_start"},
		{method: "GET", target: "/v1/streams/customers/ws?start=x", ws: true, status: 400, code: "invalid_start"},
		{method: "GET", target: "/v1/streams/customers/changes?format=avro", status: 400, code: "invalid_format"},
		{method: "GET", target: "/v1/streams/customers/changes?format=debezium&schemas=yes", status: 400, code: "invalid_schemas"},
		{method: "GET", target: "/v1/streams/customers/changes?schemas=true", status: 400, code: "invalid_schemas"},
		{method: "GET", target: "/v1/streams/customers/changes?format=default&schemas=true", status: 400, code: "invalid_schemas"},
		{method: "GET", target: "/v1/streams/customers/changes?format=debezium&schemas=true&cursor=" + tok, status: 200},
		{method: "GET", target: "/v1/streams/customers/changes?format=default&cursor=" + tok, status: 200},
		{method: "GET", target: "/v1/streams/customers/sse?format=Debezium", status: 400, code: "invalid_format"},
		{method: "GET", target: "/v1/streams/customers/ws?format=x", ws: true, status: 400, code: "invalid_format"},
		{method: "GET", target: "/v1/streams/customers/ws?schemas=1", ws: true, status: 400, code: "invalid_schemas"},
		{method: "GET", target: "/v1/stats", status: 200},
		{method: "GET", target: "/v1/streams/customers/changes?cursor=" + otherTok, status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/changes?cursor=" + tok[:len(tok)-2], header: map[string]string{"Accept": "application/x-ndjson"}, status: 400, code: "invalid_cursor"},

		// SSE and WebSocket: the same checks before streaming starts.
		{method: "GET", target: "/v1/streams/nope/sse", status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers/sse?cursor=garbage", status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/sse?cursor=" + tok, header: map[string]string{"Last-Event-ID": "garbage"}, status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/sse?subscriber=bad%20name", status: 400, code: "invalid_subscriber"},
		{method: "GET", target: "/v1/streams/nope/ws", ws: true, status: 404, code: "stream_not_found"},
		{method: "GET", target: "/v1/streams/customers/ws?cursor=" + otherTok, ws: true, status: 400, code: "invalid_cursor"},
		{method: "GET", target: "/v1/streams/customers/ws?subscriber=" + strings.Repeat("s", 65), ws: true, status: 400, code: "invalid_subscriber"},
		{method: "GET", target: "/v1/streams/customers/ws?cursor=" + tok, status: 426},

		// Subscribers: ack creates, get reads, delete forgets.
		{method: "GET", target: "/v1/streams/customers/subscribers/app", status: 404, code: "subscriber_not_found"},
		{method: "GET", target: "/v1/streams/nope/subscribers/app", status: 404, code: "stream_not_found"},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + tok + `"}`, status: 200},
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + tok + `"}`, status: 200},
		{method: "GET", target: "/v1/streams/customers/subscribers/app", status: 200},
		{method: "GET", target: "/v1/streams/customers/subscribers", status: 200},
		{method: "GET", target: "/v1/streams/nope/subscribers", status: 404, code: "stream_not_found"},
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
		if st.ws {
			wsHandshake(req)
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

// wsHandshake makes req a WebSocket opening handshake, so that the checks a
// handler makes before upgrading are the ones that answer.
func wsHandshake(req *http.Request) {
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
}

// TestTransportsMatchOpenAPI reaches real subscriptions (on a vtgate that
// never answers): empty pull batches, SSE and WebSocket heartbeats, acks
// and the WebSocket disconnect message, each checked against the spec.
func TestTransportsMatchOpenAPI(t *testing.T) {
	doc, _ := loadSpec(t)
	s, _ := newTestServer(t)
	h := s.Router()
	ctx := context.Background()
	create := httptest.NewRequest(http.MethodPost, "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer"]}`))
	create.Header.Set("Content-Type", "application/json")
	if resp, body := doRequest(t, h, create); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create stream: %d %s", resp.StatusCode, body)
	}
	tok, err := s.API().Hub.Token(ctx, &streams.Definition{Name: "customers", Keyspace: "customer"}, testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	visit := func(schema, msg string) {
		t.Helper()
		var v any
		if err := json.Unmarshal([]byte(msg), &v); err != nil {
			t.Errorf("%s: not JSON: %q", schema, msg)
			return
		}
		if err := doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s does not match %s: %v", msg, schema, err)
		}
	}

	t.Run("pull", func(t *testing.T) {
		for _, c := range []struct{ target, accept string }{
			{"/v1/streams/customers/changes?cursor=" + tok, ""},
			{"/v1/streams/customers/changes?cursor=" + tok + "&wait=0.2&limit=5", ""},
			{"/v1/streams/customers/changes?cursor=" + tok, "application/x-ndjson"},
		} {
			req := httptest.NewRequest(http.MethodGet, c.target, nil)
			if c.accept != "" {
				req.Header.Set("Accept", c.accept)
			}
			resp, body := doRequest(t, h, req)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Vsg-Next-Cursor") != tok {
				t.Errorf("GET %s: %d, next cursor %q, want 200 and the cursor given: %s", truncateString(c.target, 60), resp.StatusCode, resp.Header.Get("Vsg-Next-Cursor"), body)
			}
		}
	})

	srv := httptest.NewServer(h)
	defer srv.Close()

	t.Run("sse", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, 350*time.Millisecond)
		defer cancel()
		target := "/v1/streams/customers/sse?cursor=" + tok
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL+target, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body) // until the deadline ends the stream
		resp.Body.Close()
		validateResponse(t, httptest.NewRequest(http.MethodGet, target, nil), resp, body)
		if !strings.HasPrefix(string(body), "retry: 1000\n\n") {
			t.Errorf("stream does not start with a retry: %q", truncate(body, 200))
		}
		heartbeats := 0
		for _, block := range strings.Split(string(body), "\n\n") {
			fields := map[string]string{}
			for _, line := range strings.Split(block, "\n") {
				if k, v, ok := strings.Cut(line, ": "); ok {
					fields[k] = v
				}
			}
			if fields["event"] == "" {
				continue
			}
			if fields["event"] != "heartbeat" || fields["id"] != tok {
				t.Errorf("unexpected SSE event %q", block)
			}
			visit("Event", fields["data"])
			heartbeats++
		}
		if heartbeats == 0 {
			t.Errorf("no heartbeat in %q", body)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/streams/customers/ws?subscriber=app&cursor=" + tok
		c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"vsg.v1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if resp.StatusCode != http.StatusSwitchingProtocols || c.Subprotocol() != "vsg.v1" {
			t.Errorf("handshake: %d, subprotocol %q", resp.StatusCode, c.Subprotocol())
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, msg, err := c.Read(rctx)
		if err != nil {
			t.Fatal(err)
		}
		visit("Event", string(msg))
		if !strings.Contains(string(msg), `"type":"heartbeat"`) {
			t.Errorf("first message %s, want a heartbeat", msg)
		}

		// An ack is stored for the named subscriber.
		if err := c.Write(rctx, websocket.MessageText, []byte(`{"ack":"`+tok+`"}`)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for {
			req := httptest.NewRequest(http.MethodGet, "/v1/streams/customers/subscribers/app", nil)
			resp, body := doRequest(t, h, req)
			if resp.StatusCode == http.StatusOK {
				if !strings.Contains(string(body), tok) {
					t.Errorf("stored subscriber %s, want cursor %s", body, tok)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the WebSocket ack was not stored: %d %s", resp.StatusCode, body)
			}
			time.Sleep(20 * time.Millisecond)
		}

		// Anything but an ack ends the connection: disconnect message, then 4000.
		if err := c.Write(rctx, websocket.MessageText, []byte(`hello`)); err != nil {
			t.Fatal(err)
		}
		for {
			_, msg, err := c.Read(rctx)
			if err != nil {
				if got := websocket.CloseStatus(err); got != 4000 {
					t.Errorf("closed with %v (%d), want 4000", err, got)
				}
				break
			}
			if strings.Contains(string(msg), `"type":"disconnect"`) {
				visit("Disconnect", string(msg))
				if !strings.Contains(string(msg), `"code":4000`) || !strings.Contains(string(msg), tok) {
					t.Errorf("disconnect %s, want code 4000 and the cursor", msg)
				}
				continue
			}
			visit("Event", string(msg))
		}
	})
}

// TestDashboardServed checks that the dashboard and the files it loads are
// served from the embedded assets at the root.
func TestDashboardServed(t *testing.T) {
	s, _ := newTestServer(t)
	h := s.Router()
	get := func(path string) (*http.Response, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Result(), rec.Body.String()
	}
	resp, index := get("/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, asset := range []string{"app.js", "style.css"} {
		if !strings.Contains(index, `"`+asset+`"`) {
			t.Errorf("index.html does not load %s", asset)
		}
		if resp, _ := get("/" + asset); resp.StatusCode != http.StatusOK {
			t.Errorf("GET /%s: %d", asset, resp.StatusCode)
		}
	}
}
