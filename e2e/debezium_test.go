package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	vsg "github.com/vstream-gateway/vstream-gateway"
)

// TestDebeziumEndToEnd streams the table of every type (types_test.go)
// from the real cluster in the Debezium format (DESIGN §3.2): the copy
// phase (op r) over pull, then updates, a delete, a primary-key change and
// an insert (the binlog phase) over pull, WebSocket, SSE with schemas, and a
// webhook. Every value of every row is compared with the connector's
// encoding of it, computed here from the default format's expected JSON
// with the standard library; all four transports must deliver the same
// payloads, and a row must read the same in both phases.
func TestDebeziumEndToEnd(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	exec := freshTypesTable(t, ctx)
	exec("set time_zone = '+05:00'")
	for id := 1; id <= typeNullRow; id++ {
		exec(typeInsert(id))
	}

	g := startGateway(t, whGatewayFlags(t)...)
	stream := uniqueName("dbz")
	g.createStream(t, map[string]any{"name": stream, "keyspace": "commerce", "tables": []string{typesTable}, "start": "snapshot"})
	dbz := url.Values{"format": {"debezium"}}
	pull := &pullClient{g: g, stream: stream, extra: dbz}

	// Copy phase.
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	copied, end, err := readDebezium(rctx, pull, func(e ev, _ int) bool { return e.Type == "snapshot_complete" })
	if err != nil {
		t.Fatalf("copy phase: %v", err)
	}
	if len(copied) != typeNullRow {
		t.Fatalf("copy phase: %d rows, want %d", len(copied), typeNullRow)
	}
	copyAfter := map[int]any{}
	for i, e := range copied {
		checkDbzSchema(t, e)
		id := i + 1
		v := dbzValue(t, e)
		what := fmt.Sprintf("copy id=%d", id)
		checkDbzMeta(t, what, e, v, "r", id, stream)
		if v["transaction"] != nil || jpath(v, "source", "snapshot") != "true" {
			t.Errorf("%s: transaction %v snapshot %v, want null and \"true\"", what, v["transaction"], jpath(v, "source", "snapshot"))
		}
		checkDbzImage(t, what, v["after"], typeExpected(id))
		copyAfter[id] = v["after"]
	}

	// Binlog phase, read by every transport from the end of the copy.
	wh := newWhReceiver(t, nil)
	createWebhook(t, g, stream, map[string]any{"url": wh.url(), "secret": wh.secret, "cursor": end, "format": "debezium"})
	ws, err := connectWSWith(ctx, g, stream, "", end, dbz)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	sse, err := connectSSEWith(ctx, g, stream, "", end, url.Values{"format": {"debezium"}, "schemas": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sse.close()
	exec(typeUpdate)
	exec("delete from " + typesTable + " where id = 2")
	exec("update " + typesTable + " set id = 1003 where id = 3")
	exec(typeInsert(2))

	const changes = 5 // update, delete, the key change's delete and create, insert
	upTo := func(e ev, n int) bool { return n == changes }
	binlog, _, err := readDebezium(rctx, pull, upTo)
	if err != nil {
		t.Fatalf("binlog phase (pull): %v", err)
	}
	checkBinlogEvents(t, binlog, copyAfter, stream)
	for name, c := range map[string]client{"ws": ws, "sse": sse} {
		got, _, err := readDebezium(rctx, c, upTo)
		if err != nil {
			t.Fatalf("binlog phase (%s): %v", name, err)
		}
		sameDebezium(t, name+" vs pull", got, binlog)
	}
	for len(wh.processed()) < changes && rctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	sameDebezium(t, "webhook vs pull", wh.processed(), binlog)
}

// readDebezium reads change events until stop (given the event and the
// number of changes so far) says so, and returns them with the cursor after
// the last event read.
func readDebezium(ctx context.Context, c client, stop func(ev, int) bool) ([]ev, string, error) {
	var out []ev
	for {
		e, err := c.next(ctx)
		if err != nil {
			return out, "", err
		}
		if e.Type == "change" {
			out = append(out, e)
		}
		if stop(e, len(out)) {
			return out, e.Cursor, nil
		}
	}
}

// dbzValue is an event's value payload (unwrapped from {schema, payload}
// when it has one), numbers kept exact.
func dbzValue(t *testing.T, e ev) map[string]any {
	t.Helper()
	m := decodeExact(t, e.Raw)
	v, _ := m["value"].(map[string]any)
	if p, ok := v["payload"].(map[string]any); ok && v["schema"] != nil {
		v = p
	}
	if v == nil {
		t.Fatalf("no value: %s", e.Raw)
	}
	return v
}

func decodeExact(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}

func jpath(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func checkDbzMeta(t *testing.T, what string, e ev, v map[string]any, op string, id int, stream string) {
	t.Helper()
	if v["op"] != op {
		t.Errorf("%s: op %v, want %s", what, v["op"], op)
	}
	key := jpath(decodeExact(t, e.Raw), "key")
	if p, ok := key.(map[string]any)["payload"]; ok {
		key = p
	}
	if k := jpath(key, "id"); k != json.Number(strconv.Itoa(id)) {
		t.Errorf("%s: key %v, want id %d", what, key, id)
	}
	src := []string{"connector", "vitess", "name", stream, "keyspace", "commerce", "table", typesTable, "db", ""}
	for i := 0; i < len(src); i += 2 {
		if got := jpath(v, "source", src[i]); got != src[i+1] {
			t.Errorf("%s: source.%s = %v, want %q", what, src[i], got, src[i+1])
		}
	}
	if vg, _ := jpath(v, "source", "vgtid").(string); !strings.HasPrefix(vg, `[{"keyspace":"commerce","shard":`) {
		t.Errorf("%s: source.vgtid %q", what, vg)
	}
	if e.Cursor == "" {
		t.Errorf("%s: no cursor", what)
	}
}

// checkDbzImage compares a row image with the connector's encoding of the
// expected values.
func checkDbzImage(t *testing.T, what string, img any, want []typeCell) {
	t.Helper()
	m, ok := img.(map[string]any)
	if !ok {
		t.Errorf("%s: image %v", what, img)
		return
	}
	if len(m) != len(want) {
		t.Errorf("%s: %d columns, want %d", what, len(m), len(want))
	}
	for _, c := range want {
		w := dbzCell(t, c.col, c.want)
		if got := m[c.col]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s = %#v, want %#v (default format %s)", what, c.col, got, w, c.want)
		}
	}
}

// dbzCell is the connector's value for a column whose default-format JSON
// is want (event/TYPES.md, "The Debezium format"), computed with the
// standard library rather than the gateway's encoder.
func dbzCell(t *testing.T, col, want string) any {
	if want == "null" {
		return nil
	}
	unquote := func() string {
		s, err := strconv.Unquote(want)
		if err != nil {
			t.Fatalf("%s: %s", col, want)
		}
		return s
	}
	switch col {
	case "c_bigint_u", "c_year":
		return want
	case "c_bit1":
		return want == "1"
	case "c_bit12", "c_bit64":
		n, _ := strconv.ParseUint(want, 10, 64)
		size := map[string]int{"c_bit12": 2, "c_bit64": 8}[col]
		le := make([]byte, size)
		for i := range le {
			le[i] = byte(n >> (8 * i))
		}
		return base64.StdEncoding.EncodeToString(le)
	case "c_date":
		d, err := time.Parse("2006-01-02", unquote())
		if err != nil {
			return nil // a date with zero parts (2024-00-15)
		}
		return json.Number(strconv.FormatInt(d.Unix()/86400, 10))
	case "c_datetime":
		d, _ := time.Parse("2006-01-02T15:04:05", unquote())
		return json.Number(strconv.FormatInt(d.UnixMilli(), 10))
	case "c_datetime6":
		d, _ := time.Parse("2006-01-02T15:04:05.000000", unquote())
		return json.Number(strconv.FormatInt(d.UnixMicro(), 10))
	case "c_time", "c_time6":
		s := unquote()
		neg := strings.HasPrefix(s, "-")
		parts := strings.SplitN(strings.TrimPrefix(s, "-"), ":", 3)
		d, err := time.ParseDuration(parts[0] + "h" + parts[1] + "m" + parts[2] + "s")
		if err != nil {
			t.Fatalf("%s: %s: %v", col, want, err)
		}
		if neg {
			d = -d
		}
		return json.Number(strconv.FormatInt(d.Microseconds(), 10))
	case "c_set":
		var members []string
		if err := json.Unmarshal([]byte(want), &members); err != nil {
			t.Fatalf("%s: %s", col, want)
		}
		return strings.Join(members, ",")
	case "c_json":
		return want // io.debezium.data.Json: the document's text
	}
	d := json.NewDecoder(strings.NewReader(want))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %s: %v", col, want, err)
	}
	return v
}

// checkBinlogEvents checks the binlog phase's five events: the update of
// row 1, the delete of row 2, row 3's key change (a delete, then a create,
// each naming the other key) and row 2 inserted again.
func checkBinlogEvents(t *testing.T, evs []ev, copyAfter map[int]any, stream string) {
	t.Helper()
	if len(evs) != 5 {
		t.Fatalf("%d changes, want 5", len(evs))
	}
	updated := typeExpected(1)
	for i, c := range updated {
		if w, ok := typeUpdated[c.col]; ok {
			updated[i].want = w
		}
	}
	v := dbzValue(t, evs[0])
	checkDbzMeta(t, "update", evs[0], v, "u", 1, stream)
	checkDbzImage(t, "update before", v["before"], typeExpected(1))
	checkDbzImage(t, "update after", v["after"], updated)

	v = dbzValue(t, evs[1])
	checkDbzMeta(t, "delete", evs[1], v, "d", 2, stream)
	checkDbzImage(t, "delete before", v["before"], typeExpected(2))
	if v["after"] != nil {
		t.Errorf("delete after %v", v["after"])
	}

	kd, kc := dbzValue(t, evs[2]), dbzValue(t, evs[3])
	checkDbzMeta(t, "key change delete", evs[2], kd, "d", 3, stream)
	checkDbzMeta(t, "key change create", evs[3], kc, "c", 1003, stream)
	if h := jpath(decodeExact(t, evs[2].Raw), "headers", "__debezium.newkey", "id"); h != json.Number("1003") {
		t.Errorf("key change delete: newkey header %v", h)
	}
	if h := jpath(decodeExact(t, evs[3].Raw), "headers", "__debezium.oldkey", "id"); h != json.Number("3") {
		t.Errorf("key change create: oldkey header %v", h)
	}
	for i, w := range []string{"1", "2"} {
		if o := jpath([]map[string]any{kd, kc}[i], "transaction", "total_order"); o != json.Number(w) {
			t.Errorf("key change: total_order %v, want %s (one transaction)", o, w)
		}
	}

	v = dbzValue(t, evs[4])
	checkDbzMeta(t, "insert", evs[4], v, "c", 2, stream)
	if !reflect.DeepEqual(v["after"], copyAfter[2]) {
		t.Errorf("row 2 differs between the binlog and the copy phase:\nbinlog %v\ncopy   %v", v["after"], copyAfter[2])
	}
	if jpath(v, "source", "snapshot") != "false" || jpath(v, "transaction", "id") != jpath(v, "source", "vgtid") {
		t.Errorf("insert: snapshot %v transaction %v", jpath(v, "source", "snapshot"), v["transaction"])
	}
}

// sameDebezium asserts two readers got the same events: keys and payloads
// equal but for ts_ms, the time each reader's transaction was read.
func sameDebezium(t *testing.T, what string, got, want []ev) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	norm := func(e ev) string {
		m := decodeExact(t, e.Raw)
		for _, k := range []string{"key", "value"} {
			if p, ok := jpath(m, k).(map[string]any); ok && p["schema"] != nil {
				m[k] = p["payload"]
			}
		}
		if h, ok := m["headers"].(map[string]any); ok {
			for k, v := range h {
				if p, ok := v.(map[string]any); ok && p["schema"] != nil {
					h[k] = p["payload"]
				}
			}
		}
		delete(m["value"].(map[string]any), "ts_ms")
		delete(m, "cursor")
		delete(m, "txn_end") // WebSocket's own mark
		b, _ := json.Marshal(m)
		return string(b)
	}
	for i := range got {
		checkDbzSchema(t, got[i])
		if g, w := norm(got[i]), norm(want[i]); g != w {
			t.Errorf("%s: event %d\ngot  %s\nwant %s", what, i, g, w)
		}
	}
}

// debeziumEventSchema is openapi.yaml's DebeziumEvent.
var debeziumEventSchema = sync.OnceValues(func() (*openapi3.Schema, error) {
	doc, err := openapi3.NewLoader().LoadFromData(vsg.OpenAPI)
	if err != nil {
		return nil, err
	}
	ref := doc.Components.Schemas["DebeziumEvent"]
	if ref == nil {
		return nil, fmt.Errorf("openapi.yaml has no DebeziumEvent")
	}
	return ref.Value, nil
})

// checkDbzSchema validates an event against openapi.yaml.
func checkDbzSchema(t *testing.T, e ev) {
	t.Helper()
	s, err := debeziumEventSchema()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(e.Raw, &v); err != nil {
		t.Fatal(err)
	}
	if err := s.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("event does not match DebeziumEvent: %v\n%s", err, e.Raw)
	}
}
