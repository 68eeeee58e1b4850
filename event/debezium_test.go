package event_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/event/debezium"
)

var update = flag.Bool("update", false, "rewrite the Debezium golden files in testdata/")

// The connector documentation's example position (vitess.adoc, create event).
var docVGtid = &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{
	{Keyspace: "commerce", Shard: "80-", Gtid: "MariaDB/0-54610504-47"},
	{Keyspace: "commerce", Shard: "-80", Gtid: "MariaDB/0-1592148-45"},
}}

const (
	docCommit   = 1559033904 // seconds, as vtgate gives commit times
	docReceived = 1559033904863
)

func allTypesTable(t *testing.T) *event.Table {
	t.Helper()
	tbl, err := event.NewTable("commerce", "-80", &binlogdatapb.FieldEvent{TableName: "alltypes", Fields: event.AllTypesFields()}, event.AllTypesOptions)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// debeziumOf encodes one row change and re-encodes it in the Debezium format.
func debeziumOf(t *testing.T, tbl *event.Table, op event.Op, rc *binlogdatapb.RowChange, o debezium.Options) []event.Event {
	t.Helper()
	ts := int64(docCommit)
	if op == event.OpSnapshot {
		ts = 0
	}
	ev, err := tbl.Encode(op, rc, ts)
	if err != nil {
		t.Fatal(err)
	}
	return debezium.Encode(debezium.Txn{Events: []event.Event{ev}, VGtid: docVGtid, CommitTS: ts, Received: time.UnixMilli(docReceived)}, o)
}

// decode parses a finished event keeping numbers exact.
func decode(t *testing.T, ev event.Event) map[string]any {
	t.Helper()
	b := ev.AppendJSON(nil, "tok")
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func path(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

// TestDebeziumGolden writes every alltypes sample in both phases and
// compares with testdata/debezium-{binlog,copy}.golden (go test -update
// rewrites them; review the diff). The two phases must give the same
// images, as the default format does.
func TestDebeziumGolden(t *testing.T) {
	tbl := allTypesTable(t)
	images := map[bool][]string{}
	for _, copyPhase := range []bool{false, true} {
		var out bytes.Buffer
		for k := range event.AllTypesSamples() {
			row := event.AllTypesRow(k, copyPhase)
			op := event.OpInsert
			if copyPhase {
				op = event.OpSnapshot
			}
			evs := debeziumOf(t, tbl, op, &binlogdatapb.RowChange{After: row}, debezium.Options{Stream: "my_sharded_connector"})
			if len(evs) != 1 {
				t.Fatalf("%d events", len(evs))
			}
			b := evs[0].AppendJSON(nil, "")
			out.Write(b)
			out.WriteByte('\n')
			after, _ := json.Marshal(path(decode(t, evs[0]), "value", "after"))
			images[copyPhase] = append(images[copyPhase], string(after))
		}
		name := "debezium-binlog.golden"
		if copyPhase {
			name = "debezium-copy.golden"
		}
		golden(t, name, out.Bytes())
	}
	for k := range images[false] {
		if images[false][k] != images[true][k] {
			t.Errorf("row %d differs between phases:\nbinlog %s\ncopy   %s", k, images[false][k], images[true][k])
		}
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s line %d:\ngot  %s\nwant %s", name, i+1, g, w)
			}
		}
	}
}

// TestDebeziumValues checks the documented encodings one by one, against
// values computed here independently of the encoder.
func TestDebeziumValues(t *testing.T) {
	tbl := allTypesTable(t)
	after := func(k int) map[string]any {
		evs := debeziumOf(t, tbl, event.OpInsert, &binlogdatapb.RowChange{After: event.AllTypesRow(k, false)}, debezium.Options{Stream: "s"})
		return path(decode(t, evs[0]), "value", "after").(map[string]any)
	}
	micros := func(y int, mo time.Month, d, h, mi, s, us int) string {
		return itoa(time.Date(y, mo, d, h, mi, s, us*1000, time.UTC).UnixMicro())
	}
	r0, r1, r2 := after(0), after(1), after(2)
	cases := []struct {
		row  map[string]any
		col  string
		want any
	}{
		{r0, "c_bool", json.Number("1")},                     // INT16
		{r0, "c_bigint", json.Number("9223372036854775807")}, // INT64
		{r0, "c_bigint_u", "18446744073709551615"},           // UINT64: a string, as the connector writes it
		{r0, "c_decimal", "99999999999999999999.9999999999"}, // decimal.handling.mode=string
		{r0, "c_float", json.Number("3.40282e+38")},
		{r0, "c_bit1", true},
		{r1, "c_bit1", false},
		{r0, "c_bit12", "qgo="},                // b'101010101010' = 0x0aaa, little-endian bytes aa 0a
		{r0, "c_bit64", "//////////8="},        // eight 0xff bytes
		{r0, "c_date", json.Number("2932896")}, // 9999-12-31: days since the epoch
		{r2, "c_date", nil},                    // 0000-00-00
		{r0, "c_time", json.Number(itoa((838*3600 + 59*60 + 59) * 1_000_000))},
		{r2, "c_time6", json.Number("-1500000")},
		{r0, "c_datetime", json.Number(itoa(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).UnixMilli()))}, // Timestamp: ms
		{r0, "c_datetime6", json.Number(micros(2024, 6, 1, 12, 34, 56, 120))},                               // MicroTimestamp: µs
		{r2, "c_datetime6", nil},
		{r0, "c_ts3", "2024-06-01T07:34:56.789Z"}, // ZonedTimestamp
		{r0, "c_year", "2155"},
		{r0, "c_enum", "c"},
		{r0, "c_set", "x,z"},
		{r2, "c_set", "x,y,z"},
		{r0, "c_json", `{"a":[1,2.5,"x"],"b":null}`}, // io.debezium.data.Json: the document's text
		{r0, "c_blob", "AP8Q"},                       // BYTES, base64
		{r0, "c_varchar", "héllo 😀 wörld 🚀"},
		{r0, "c_uuid", "123e4567-e89b-12d3-a456-426614174000"},
	}
	for _, c := range cases {
		if got := c.row[c.col]; got != c.want {
			t.Errorf("%s = %#v, want %#v", c.col, got, c.want)
		}
	}
	if got := after(3)["c_set"]; got != "" {
		t.Errorf("empty SET = %#v, want \"\"", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// customersTable is the connector documentation's example table.
func customersTable(t *testing.T) *event.Table {
	t.Helper()
	f := func(name string, typ querypb.Type, flags uint32, ct string) *querypb.Field {
		return &querypb.Field{Name: name, Type: typ, Flags: flags, Charset: 45, ColumnType: ct}
	}
	notNull := uint32(querypb.MySqlFlag_NOT_NULL_FLAG)
	pk := notNull | uint32(querypb.MySqlFlag_PRI_KEY_FLAG)
	tbl, err := event.NewTable("commerce", "-80", &binlogdatapb.FieldEvent{TableName: "customers", Fields: []*querypb.Field{
		f("id", querypb.Type_INT32, pk, "int(11)"),
		f("first_name", querypb.Type_VARCHAR, notNull, "varchar(255)"),
		f("last_name", querypb.Type_VARCHAR, notNull, "varchar(255)"),
		f("email", querypb.Type_VARCHAR, notNull, "varchar(255)"),
	}}, event.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func customerRow(id, first string) *querypb.Row {
	vals := []string{id, first, "Kretchmar", "annek@noanswer.org"}
	r := &querypb.Row{}
	for _, v := range vals {
		r.Lengths = append(r.Lengths, int64(len(v)))
		r.Values = append(r.Values, v...)
	}
	return r
}

// TestDebeziumDocumentedCreate compares with the connector documentation's
// create event (vitess.adoc, "create events"): the same table, row, shard
// and position give the same payload, but for what the gateway decides
// itself — source.version, the processing time ts_ms (the documentation's
// is the connector's clock) and source.ts_ms, whole seconds in a VStream —
// and the transaction block, which the documentation's example leaves out
// (the connector writes it with provide.transaction.metadata=true).
func TestDebeziumDocumentedCreate(t *testing.T) {
	evs := debeziumOf(t, customersTable(t), event.OpInsert, &binlogdatapb.RowChange{After: customerRow("1", "Anne")}, debezium.Options{Stream: "my_sharded_connector"})
	got := decode(t, evs[0])
	doc := `{
        "before": null,
        "after": {"id": 1, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"},
        "source": {
            "version": "` + debezium.Version + `",
            "connector": "vitess",
            "name": "my_sharded_connector",
            "ts_ms": 1559033904000,
            "snapshot": "false",
            "db": "",
            "sequence": null,
            "keyspace": "commerce",
            "table": "customers",
            "shard": "-80",
            "vgtid": "[{\"keyspace\":\"commerce\",\"shard\":\"80-\",\"gtid\":\"MariaDB/0-54610504-47\"},{\"keyspace\":\"commerce\",\"shard\":\"-80\",\"gtid\":\"MariaDB/0-1592148-45\"}]"
        },
        "op": "c",
        "ts_ms": 1559033904863,
        "transaction": {
            "id": "[{\"keyspace\":\"commerce\",\"shard\":\"80-\",\"gtid\":\"MariaDB/0-54610504-47\"},{\"keyspace\":\"commerce\",\"shard\":\"-80\",\"gtid\":\"MariaDB/0-1592148-45\"}]",
            "total_order": 1,
            "data_collection_order": 1
        }
    }`
	want := decode(t, event.Event{JSON: []byte(`{"value":` + doc)})["value"]
	if g, w := mustMarshal(t, got["value"]), mustMarshal(t, want); g != w {
		t.Errorf("payload\ngot  %s\nwant %s", g, w)
	}
	if g := mustMarshal(t, got["key"]); g != `{"id":1}` {
		t.Errorf("key %s", g)
	}
	if got["type"] != "change" || got["cursor"] != "tok" {
		t.Errorf("type %v cursor %v", got["type"], got["cursor"])
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDebeziumOps covers update, delete, a primary-key update (a delete,
// then a create, with the connector's key headers), the transaction's
// order counters, copy rows (op r) and control events passed through.
func TestDebeziumOps(t *testing.T) {
	tbl := customersTable(t)
	enc := func(op event.Op, rc *binlogdatapb.RowChange) event.Event {
		ev, err := tbl.Encode(op, rc, docCommit)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	ctl := event.Control(event.TypeDDL, "commerce", "-80", map[string]any{"statement": "alter table customers add column x int"})
	txn := []event.Event{
		enc(event.OpUpdate, &binlogdatapb.RowChange{Before: customerRow("1", "Anne"), After: customerRow("1", "Anne Marie")}),
		enc(event.OpDelete, &binlogdatapb.RowChange{Before: customerRow("1", "Anne Marie")}),
		enc(event.OpUpdate, &binlogdatapb.RowChange{Before: customerRow("2", "Bo"), After: customerRow("3", "Bo")}),
		ctl,
	}
	out := debezium.Encode(debezium.Txn{Events: txn, VGtid: docVGtid, CommitTS: docCommit, Received: time.UnixMilli(docReceived)}, debezium.Options{Stream: "s"})
	if len(out) != 5 {
		t.Fatalf("%d events, want 5 (the key change is two)", len(out))
	}
	type want struct {
		op, key, before, after, headers string
		total, order                    int
	}
	wants := []want{
		{"u", `{"id":1}`, "Anne", "Anne Marie", "", 1, 1},
		{"d", `{"id":1}`, "Anne Marie", "", "", 2, 2},
		{"d", `{"id":2}`, "Bo", "", `{"__debezium.newkey":{"id":3}}`, 3, 3},
		{"c", `{"id":3}`, "", "Bo", `{"__debezium.oldkey":{"id":2}}`, 4, 4},
	}
	for i, w := range wants {
		m := decode(t, out[i])
		v := m["value"].(map[string]any)
		if v["op"] != w.op || mustMarshal(t, m["key"]) != w.key {
			t.Errorf("event %d: op %v key %s, want %s %s", i, v["op"], mustMarshal(t, m["key"]), w.op, w.key)
		}
		name := func(img string) any {
			if x, ok := v[img].(map[string]any); ok {
				return x["first_name"]
			}
			return ""
		}
		if name("before") != w.before || name("after") != w.after {
			t.Errorf("event %d: before %v after %v", i, name("before"), name("after"))
		}
		if h := m["headers"]; (h == nil) != (w.headers == "") || (h != nil && mustMarshal(t, h) != w.headers) {
			t.Errorf("event %d: headers %s, want %s", i, mustMarshal(t, h), w.headers)
		}
		tx := v["transaction"].(map[string]any)
		if tx["total_order"] != json.Number(itoa(int64(w.total))) || tx["data_collection_order"] != json.Number(itoa(int64(w.order))) {
			t.Errorf("event %d: transaction %v", i, tx)
		}
	}
	if out[4].Type != event.TypeDDL || !bytes.Equal(out[4].JSON, ctl.JSON) {
		t.Errorf("control event changed: %s", out[4].JSON)
	}
	if out[2].Op != event.OpDelete || out[3].Op != event.OpInsert {
		t.Errorf("key change ops %s %s", out[2].Op, out[3].Op)
	}

	snap, err := tbl.Encode(event.OpSnapshot, &binlogdatapb.RowChange{After: customerRow("4", "Cy")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, debezium.Encode(debezium.Txn{Events: []event.Event{snap}, VGtid: docVGtid, Received: time.UnixMilli(docReceived)}, debezium.Options{Stream: "s"})[0])
	if path(m, "value", "op") != "r" || path(m, "value", "source", "snapshot") != "true" ||
		path(m, "value", "transaction") != nil || path(m, "value", "source", "ts_ms") != json.Number(itoa(docReceived)) {
		t.Errorf("copy row: %s", mustMarshal(t, m["value"]))
	}
}

// TestDebeziumSchemas checks the {schema, payload} documents: the
// connector's schema names, and a column's literal and semantic types.
func TestDebeziumSchemas(t *testing.T) {
	evs := debeziumOf(t, allTypesTable(t), event.OpInsert, &binlogdatapb.RowChange{After: event.AllTypesRow(0, false)}, debezium.Options{Stream: "app", Schemas: true})
	m := decode(t, evs[0])
	if n := path(m, "key", "schema", "name"); n != "app.commerce.alltypes.Key" {
		t.Errorf("key schema name %v", n)
	}
	if p := mustMarshal(t, path(m, "key", "payload")); p != `{"id":1}` {
		t.Errorf("key payload %s", p)
	}
	if n := path(m, "value", "schema", "name"); n != "app.commerce.alltypes.Envelope" {
		t.Errorf("envelope name %v", n)
	}
	if op := path(m, "value", "payload", "op"); op != "c" {
		t.Errorf("payload op %v", op)
	}
	fields := path(m, "value", "schema", "fields").([]any)
	names := []string{}
	var after map[string]any
	for _, f := range fields {
		fm := f.(map[string]any)
		names = append(names, fm["field"].(string))
		if fm["field"] == "after" {
			after = fm
		}
	}
	if got := strings.Join(names, ","); got != "before,after,source,op,ts_ms,transaction" {
		t.Errorf("envelope fields %s", got)
	}
	if after["name"] != "app.commerce.alltypes.Value" {
		t.Errorf("value schema name %v", after["name"])
	}
	want := map[string]string{
		"id":          `{"field":"id","optional":false,"type":"int32"}`,
		"c_bool":      `{"field":"c_bool","optional":true,"type":"int16"}`,
		"c_bigint_u":  `{"field":"c_bigint_u","optional":true,"type":"string"}`,
		"c_datetime6": `{"field":"c_datetime6","name":"io.debezium.time.MicroTimestamp","optional":true,"type":"int64","version":1}`,
		"c_datetime":  `{"field":"c_datetime","name":"io.debezium.time.Timestamp","optional":true,"type":"int64","version":1}`,
		"c_date":      `{"field":"c_date","name":"io.debezium.time.Date","optional":true,"type":"int32","version":1}`,
		"c_time6":     `{"field":"c_time6","name":"io.debezium.time.MicroTime","optional":true,"type":"int64","version":1}`,
		"c_ts3":       `{"field":"c_ts3","name":"io.debezium.time.ZonedTimestamp","optional":true,"type":"string","version":1}`,
		"c_enum":      `{"field":"c_enum","name":"io.debezium.data.Enum","optional":true,"parameters":{"allowed":"a,b,c"},"type":"string","version":1}`,
		"c_set":       `{"field":"c_set","name":"io.debezium.data.EnumSet","optional":true,"parameters":{"allowed":"x,y,z"},"type":"string","version":1}`,
		"c_json":      `{"field":"c_json","name":"io.debezium.data.Json","optional":true,"type":"string","version":1}`,
		"c_bit1":      `{"field":"c_bit1","optional":true,"type":"boolean"}`,
		"c_bit12":     `{"field":"c_bit12","name":"io.debezium.data.Bits","optional":true,"parameters":{"length":"12"},"type":"bytes","version":1}`,
		"c_blob":      `{"field":"c_blob","optional":true,"type":"bytes"}`,
		"c_float":     `{"field":"c_float","optional":true,"type":"double"}`,
		"c_decimal":   `{"field":"c_decimal","optional":true,"type":"string"}`,
	}
	for _, f := range after["fields"].([]any) {
		fm := f.(map[string]any)
		if w, ok := want[fm["field"].(string)]; ok {
			if g := mustMarshal(t, fm); g != w {
				t.Errorf("column schema\ngot  %s\nwant %s", g, w)
			}
			delete(want, fm["field"].(string))
		}
	}
	if len(want) > 0 {
		t.Errorf("columns missing from the schema: %v", want)
	}
	// Every event of the table carries the same schema bytes.
	again := debeziumOf(t, allTypesTable(t), event.OpInsert, &binlogdatapb.RowChange{After: event.AllTypesRow(1, false)}, debezium.Options{Stream: "app", Schemas: true})
	if a, b := mustMarshal(t, path(decode(t, again[0]), "value", "schema")), mustMarshal(t, path(m, "value", "schema")); a != b {
		t.Error("the schema differs between two rows of one table")
	}
}

// With schemas, a small transaction's events hold their transaction's
// part themselves and share the table's schema as their tail; a larger
// one's share a tail per transaction holding both. The bytes are the
// same either way: the first event of a transaction of one, of two, and
// of five identical rows (in copy and in binlog) are one document, and
// the schema of small transactions is not copied from one to the next.
func TestDebeziumTailsAgree(t *testing.T) {
	tbl := allTypesTable(t)
	for _, op := range []event.Op{event.OpInsert, event.OpSnapshot} {
		ts := int64(docCommit)
		if op == event.OpSnapshot {
			ts = 0
		}
		ev, err := tbl.Encode(op, &binlogdatapb.RowChange{After: event.AllTypesRow(0, op == event.OpSnapshot)}, ts)
		if err != nil {
			t.Fatal(err)
		}
		var firsts []string
		var tails [][]byte
		for _, n := range []int{1, 2, 5} {
			txn := debezium.Txn{Events: slices.Repeat([]event.Event{ev}, n), VGtid: docVGtid, CommitTS: ts, Received: time.UnixMilli(docReceived)}
			out := debezium.Encode(txn, debezium.Options{Stream: "app", Schemas: true})
			if len(out) != n {
				t.Fatalf("%s: %d events of %d", op, len(out), n)
			}
			for _, e := range out {
				decode(t, e) // each is a valid document
			}
			firsts = append(firsts, string(out[0].AppendJSON(nil, "c")))
			tails = append(tails, out[0].Tail)
		}
		for i, f := range firsts[1:] {
			if f != firsts[0] {
				t.Errorf("%s: the first event of a transaction of %d differs from a transaction of one:\n%s\n%s", op, []int{2, 5}[i], f, firsts[0])
			}
		}
		if &tails[0][0] != &tails[1][0] {
			t.Errorf("%s: two small transactions do not share their schema tail", op)
		}
		if !bytes.Contains(tails[2], []byte(`"source"`)) {
			t.Errorf("%s: a transaction of five does not share its source block: tail %s", op, tails[2])
		}
	}
}
