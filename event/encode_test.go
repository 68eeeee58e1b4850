package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

func asRowError(err error, target **RowError) bool { return errors.As(err, target) }

// customerFields is a typical table: composite primary key not in first
// position, text, a timestamp, a decimal.
func customerFields() []*querypb.Field {
	return []*querypb.Field{
		fld("tenant_id", querypb.Type_INT64, 49667&^512, 20, 0, 63, "bigint(20)"),
		fld("email", querypb.Type_VARCHAR, 0, 1020, 0, 45, "varchar(255)"),
		fld("customer_id", querypb.Type_INT64, 49667, 20, 0, 63, "bigint(20)"),
		fld("balance", querypb.Type_DECIMAL, flNum, 12, 2, 63, "decimal(10,2)"),
	}
}

func customerTable(t testing.TB) *Table {
	t.Helper()
	tbl, err := NewTable("customer", "-80", &binlogdatapb.FieldEvent{TableName: "customer", Fields: customerFields()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func row(vals ...string) *querypb.Row {
	bs := make([][]byte, len(vals))
	for i, v := range vals {
		if v != "\x00NULL" {
			bs[i] = []byte(v)
		}
	}
	return buildRow(bs...)
}

const null = "\x00NULL"

func TestChangeShapes(t *testing.T) {
	tbl := customerTable(t)
	r1 := row("7", "a@b.c", "5", "10.00")
	r2 := row("7", "new@b.c", "6", "12.50")
	const ts = 1796223662 // 2026-12-02T15:01:02Z
	cases := []struct {
		op   Op
		rc   *binlogdatapb.RowChange
		ts   int64
		want string
	}{
		{OpInsert, &binlogdatapb.RowChange{After: r1}, ts,
			`{"type":"change","op":"insert","keyspace":"customer","shard":"-80","table":"customer","key":{"tenant_id":7,"customer_id":5},"before":null,"after":{"tenant_id":7,"email":"a@b.c","customer_id":5,"balance":"10.00"},"commit_ts":"2026-12-02T15:01:02Z"`},
		{OpUpdate, &binlogdatapb.RowChange{Before: r1, After: r2}, ts,
			`{"type":"change","op":"update","keyspace":"customer","shard":"-80","table":"customer","key":{"tenant_id":7,"customer_id":6},"before":{"tenant_id":7,"email":"a@b.c","customer_id":5,"balance":"10.00"},"after":{"tenant_id":7,"email":"new@b.c","customer_id":6,"balance":"12.50"},"commit_ts":"2026-12-02T15:01:02Z"`},
		{OpDelete, &binlogdatapb.RowChange{Before: r1}, ts,
			`{"type":"change","op":"delete","keyspace":"customer","shard":"-80","table":"customer","key":{"tenant_id":7,"customer_id":5},"before":{"tenant_id":7,"email":"a@b.c","customer_id":5,"balance":"10.00"},"after":null,"commit_ts":"2026-12-02T15:01:02Z"`},
		{OpSnapshot, &binlogdatapb.RowChange{After: r1}, 0,
			`{"type":"change","op":"snapshot","keyspace":"customer","shard":"-80","table":"customer","key":{"tenant_id":7,"customer_id":5},"before":null,"after":{"tenant_id":7,"email":"a@b.c","customer_id":5,"balance":"10.00"},"commit_ts":null`},
		// An image the op does not use is ignored.
		{OpInsert, &binlogdatapb.RowChange{Before: r2, After: r1}, ts,
			`{"type":"change","op":"insert","keyspace":"customer","shard":"-80","table":"customer","key":{"tenant_id":7,"customer_id":5},"before":null,"after":{"tenant_id":7,"email":"a@b.c","customer_id":5,"balance":"10.00"},"commit_ts":"2026-12-02T15:01:02Z"`},
	}
	for _, c := range cases {
		ev, err := tbl.Encode(c.op, c.rc, c.ts)
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		if string(ev.JSON) != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.op, ev.JSON, c.want)
		}
		if ev.Type != TypeChange || ev.Op != c.op || ev.Keyspace != "customer" || ev.Shard != "-80" || ev.Table != "customer" {
			t.Errorf("%s: event header %+v", c.op, ev)
		}
		full := ev.AppendJSON(nil, "tok_1")
		if !json.Valid(full) || !strings.HasSuffix(string(full), `,"cursor":"tok_1"}`) {
			t.Errorf("%s: finished event %s", c.op, full)
		}
		if len(ev.JSON) != cap(ev.JSON) {
			t.Errorf("%s: JSON not sized exactly (len %d cap %d)", c.op, len(ev.JSON), cap(ev.JSON))
		}
	}
}

func TestChangeOp(t *testing.T) {
	r := row("1")
	for _, c := range []struct {
		rc   *binlogdatapb.RowChange
		want Op
		ok   bool
	}{
		{&binlogdatapb.RowChange{After: r}, OpInsert, true},
		{&binlogdatapb.RowChange{Before: r, After: r}, OpUpdate, true},
		{&binlogdatapb.RowChange{Before: r}, OpDelete, true},
		{&binlogdatapb.RowChange{}, "", false},
		{nil, "", false},
	} {
		if op, ok := ChangeOp(c.rc); op != c.want || ok != c.ok {
			t.Errorf("ChangeOp(%v) = %q, %v", c.rc, op, ok)
		}
	}
}

func TestNoPrimaryKeyAndNullKey(t *testing.T) {
	fe := &binlogdatapb.FieldEvent{TableName: "log", Fields: []*querypb.Field{
		fld("msg", querypb.Type_VARCHAR, 0, 40, 0, 45, "varchar(10)"),
	}}
	tbl, err := NewTable("ks", "0", fe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := tbl.Encode(OpInsert, &binlogdatapb.RowChange{After: row(null)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(member(t, ev, "key")); got != "null" {
		t.Errorf("key without primary key: %s", got)
	}
	if got := string(member(t, ev, "after")); got != `{"msg":null}` {
		t.Errorf("after: %s", got)
	}
	if got := string(member(t, ev, "commit_ts")); got != `"1970-01-01T00:00:01Z"` {
		t.Errorf("commit_ts: %s", got)
	}
}

func TestTableNames(t *testing.T) {
	for _, c := range []struct{ ks, feKS, name, want string }{
		{"customer", "", "customer", "customer"},
		{"customer", "", "customer.orders", "orders"},
		{"", "customer", "customer.orders", "orders"},
		{"customer", "customer", "other.orders", "other.orders"},
		{"customer", "", `we"ird`, `we"ird`},
	} {
		fe := &binlogdatapb.FieldEvent{TableName: c.name, Keyspace: c.feKS, Shard: "80-",
			Fields: []*querypb.Field{fld("id", querypb.Type_INT32, flPKAuto, 11, 0, 63, "")}}
		tbl, err := NewTable(c.ks, "", fe, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tbl.Name() != c.want || tbl.Shard() != "80-" {
			t.Errorf("%q: name %q shard %q", c.name, tbl.Name(), tbl.Shard())
		}
		ev, err := tbl.Encode(OpInsert, &binlogdatapb.RowChange{After: row("1")}, 1)
		if err != nil {
			t.Fatal(err)
		}
		var table string
		if err := json.Unmarshal(member(t, ev, "table"), &table); err != nil || table != c.want {
			t.Errorf("%q: table member %q (%v)", c.name, table, err)
		}
	}
}

func TestBadFieldEvents(t *testing.T) {
	id := fld("id", querypb.Type_INT32, flPKAuto, 11, 0, 63, "")
	for name, fe := range map[string]*binlogdatapb.FieldEvent{
		"nil":       nil,
		"no name":   {Fields: []*querypb.Field{id}},
		"nil field": {TableName: "t", Fields: []*querypb.Field{nil}},
		"duplicate": {TableName: "t", Fields: []*querypb.Field{id, id}},
		"no column": {TableName: "t", Fields: []*querypb.Field{fld("", querypb.Type_INT32, 0, 11, 0, 63, "")}},
	} {
		_, err := NewTable("ks", "0", fe, Options{})
		var fee *FieldEventError
		if !errors.As(err, &fee) || !errors.Is(err, ErrBadFieldEvent) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestMalformedRows(t *testing.T) {
	tbl := customerTable(t)
	good := row("7", "a@b.c", "5", "10.00")
	cases := map[string]struct {
		op Op
		rc *binlogdatapb.RowChange
	}{
		"unknown op":         {"upsert", &binlogdatapb.RowChange{After: good}},
		"nil change":         {OpInsert, nil},
		"insert no after":    {OpInsert, &binlogdatapb.RowChange{Before: good}},
		"snapshot no after":  {OpSnapshot, &binlogdatapb.RowChange{}},
		"delete no before":   {OpDelete, &binlogdatapb.RowChange{After: good}},
		"update no before":   {OpUpdate, &binlogdatapb.RowChange{After: good}},
		"update no after":    {OpUpdate, &binlogdatapb.RowChange{Before: good}},
		"too few values":     {OpInsert, &binlogdatapb.RowChange{After: row("7", "a@b.c", "5")}},
		"too many values":    {OpInsert, &binlogdatapb.RowChange{After: row("7", "a@b.c", "5", "1.00", "x")}},
		"bad before count":   {OpUpdate, &binlogdatapb.RowChange{Before: row("7"), After: good}},
		"length overrun":     {OpInsert, &binlogdatapb.RowChange{After: &querypb.Row{Lengths: []int64{1, 5, 1, 4}, Values: []byte("7a@b.c5")}}},
		"key length overrun": {OpInsert, &binlogdatapb.RowChange{After: &querypb.Row{Lengths: []int64{100, 1, 1, 1}, Values: []byte("7a51")}}},
		"trailing bytes":     {OpInsert, &binlogdatapb.RowChange{After: &querypb.Row{Lengths: []int64{1, 1, 1, 4}, Values: []byte("7a510.00xyz")}}},
		"length -2":          {OpInsert, &binlogdatapb.RowChange{After: &querypb.Row{Lengths: []int64{1, -2, 1, 4}, Values: []byte("7510.00")}}},
		"bad key value":      {OpInsert, &binlogdatapb.RowChange{After: row("x", "a@b.c", "5", "10.00")}},
		"bad after value":    {OpUpdate, &binlogdatapb.RowChange{Before: good, After: row("7", "a@b.c", "5", "ten")}},
	}
	for name, c := range cases {
		ev, err := tbl.Encode(c.op, c.rc, 1)
		var re *RowError
		if !errors.As(err, &re) || !errors.Is(err, ErrMalformedRow) || ev.JSON != nil {
			t.Errorf("%s: got %v, %s", name, err, ev.JSON)
			continue
		}
		if re.Table != "customer" || re.Keyspace != "customer" || re.Error() == "" {
			t.Errorf("%s: error fields %+v", name, re)
		}
		// AppendChange leaves dst as it was.
		dst := []byte("prefix")
		out, err := tbl.AppendChange(dst, c.op, c.rc, 1)
		if err == nil || string(out) != "prefix" {
			t.Errorf("%s: AppendChange returned %q, %v", name, out, err)
		}
	}
}

func TestAppendRowErrors(t *testing.T) {
	tbl := customerTable(t)
	out, err := tbl.AppendRow([]byte("x"), row("1"), false)
	var re *RowError
	if !errors.As(err, &re) || string(out) != "x" {
		t.Errorf("got %q, %v", out, err)
	}
}

// TestEscaping: every string leaves the encoder as valid JSON that is also
// safe inside JavaScript and on one SSE line.
func TestEscaping(t *testing.T) {
	f := fld("s", querypb.Type_VARCHAR, 0, 40, 0, 45, "varchar(10)")
	cases := map[string]string{
		"plain":          `"plain"`,
		`q"b\`:           `"q\"b\\"`,
		"\n\r\t\b\f":     `"\n\r\t\b\f"`,
		"\x00\x01\x1f":   `"\u0000\u0001\u001f"`,
		"\x7f":           "\"\x7f\"",
		"a\u2028b\u2029": `"a\u2028b\u2029"`,
		"bad\xffutf8":    `"bad\ufffdutf8"`,
		"\xe2\x82":       `"\ufffd\ufffd"`,
		"</script>":      `"</script>"`,
		"😀é":             `"😀é"`,
	}
	for in, want := range cases {
		got := encodeValue(t, f, Options{}, []byte(in), false)
		if got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	// Column and table names are escaped too.
	fe := &binlogdatapb.FieldEvent{TableName: "t\"\n", Fields: []*querypb.Field{fld("c\u2028\"", querypb.Type_INT32, flPKAuto, 11, 0, 63, "")}}
	tbl, err := NewTable("k\\s", "0", fe, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := tbl.Encode(OpInsert, &binlogdatapb.RowChange{After: row("1")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if full := ev.AppendJSON(nil, ""); !json.Valid(full) || strings.ContainsAny(string(full), "\n\u2028") {
		t.Errorf("names not escaped: %s", full)
	}
}

// TestCharsets: text is transcoded by the column's collation id.
func TestCharsets(t *testing.T) {
	cases := []struct {
		collation uint32
		in, want  string
	}{
		{8, "caf\xe9 \x80 \x81", `"café € ` + "\u0081" + `"`}, // latin1 is cp1252 in MySQL, 0x81 kept
		{47, "\xc0", `"À"`}, // latin1_bin
		{51, "\xcf\xf0\xe8\xe2\xe5\xf2", `"Привет"`}, // cp1251
		{9, "\xa9", `"Š"`},                        // latin2
		{11, "ab\x80", `"ab\ufffd"`},              // ascii: high bytes undefined
		{35, "\x00h\x00i", `"hi"`},                // ucs2
		{56, "h\x00i\x00", `"hi"`},                // utf16le
		{60, "\x00\x01\xf6\x00", `"😀"`},           // utf32
		{13, "\x82\xa0", `"あ"`},                   // sjis
		{28, "\xc4\xe3\xba\xc3", `"你好"`},          // gbk
		{18, "\xa1", `"ก"`},                       // tis620
		{33, "h\xc3\xa9", `"hé"`},                 // utf8mb3
		{1, "a\xa4\xa4b", `"a中b"`},                // big5
		{19, "\xc7\xd1\xb1\xb9", `"한국"`},          // euckr
		{24, "\xd6\xd0\xce\xc4", `"中文"`},          // gb2312
		{12, "\xc6\xfc\xcb\xdc", `"日本"`},          // ujis
		{97, "\xc6\xfc\xcb\xdc", `"日本"`},          // eucjpms
		{95, "\x87\x40\x93\xfa", `"①日"`},          // cp932: NEC extension
		{248, "\x94\x39\xfc\x36\xa8\xa6", `"😀é"`}, // gb18030: four-byte sequence
	}
	for _, c := range cases {
		f := fld("s", querypb.Type_VARCHAR, 0, 40, 0, c.collation, "")
		if got := encodeValue(t, f, Options{}, []byte(c.in), false); got != c.want {
			t.Errorf("collation %d %q: got %s, want %s", c.collation, c.in, got, c.want)
		}
	}
}

func TestCommitTS(t *testing.T) {
	for ts, want := range map[int64]string{
		0:          "null",
		1:          `"1970-01-01T00:00:01Z"`,
		1717227296: `"2024-06-01T07:34:56Z"`,
		4102444799: `"2099-12-31T23:59:59Z"`,
		-1:         `"1969-12-31T23:59:59Z"`,
	} {
		if got := string(appendCommitTS(nil, ts)); got != want {
			t.Errorf("%d: got %s, want %s", ts, got, want)
		}
	}
}

func TestColumns(t *testing.T) {
	got := strings.Join(customerTable(t).Columns(), ",")
	if got != "tenant_id,email,customer_id,balance" {
		t.Errorf("Columns() = %s", got)
	}
}

func TestSlabCopies(t *testing.T) {
	var s Slab
	a := s.Copy([]byte("first"))
	b := s.Copy([]byte("second"))
	if string(a) != "first" || string(b) != "second" {
		t.Fatalf("copies %q %q", a, b)
	}
	if cap(a) != len(a) {
		t.Fatalf("a copy's capacity runs past it (%d > %d): appending would overwrite the next one", cap(a), len(a))
	}
	a = append(a, "!"...)
	if string(b) != "second" {
		t.Fatalf("appending to one copy changed the next: %q", b)
	}
	big := make([]byte, slabMax+1)
	if c := s.Copy(big); len(c) != len(big) {
		t.Fatal("a big body was cut")
	}
	src := []byte("mutable")
	c := s.Copy(src)
	src[0] = 'X'
	if string(c) != "mutable" {
		t.Fatal("the copy aliases its source")
	}
	var none *Slab
	if string(none.Copy([]byte("x"))) != "x" {
		t.Fatal("a nil slab must allocate")
	}
	// Blocks fill up and are replaced, never overwritten.
	var kept [][]byte
	for i := 0; i < 3*slabBlock/100; i++ {
		kept = append(kept, s.Copy(bytes.Repeat([]byte{byte(i)}, 100)))
	}
	for i, k := range kept {
		if k[0] != byte(i) || k[99] != byte(i) {
			t.Fatalf("copy %d was overwritten", i)
		}
	}
}

// The last event of a transaction carries "txn_end":true after its
// cursor: the object AppendJSON makes, one member longer.
func TestAppendWithTxnEnd(t *testing.T) {
	e := Event{Type: TypeChange, JSON: []byte(`{"type":"change","op":"insert","after":{"id":1},"commit_ts":null`)}
	for _, cursor := range []string{"", "abc-_123"} {
		plain := e.AppendJSON(nil, cursor)
		want := string(plain[:len(plain)-1]) + `,"txn_end":true}`
		got := e.AppendWithTxnEnd([]byte("x"), cursor)
		if string(got) != "x"+want {
			t.Errorf("cursor %q: got %s, want x%s", cursor, got, want)
		}
		var m map[string]any
		if err := json.Unmarshal(got[1:], &m); err != nil || m["txn_end"] != true {
			t.Errorf("cursor %q: %s is not an event with txn_end: %v", cursor, got[1:], err)
		}
	}
}
