package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// encodeValue encodes one value of field as the only column of a table and
// returns its JSON.
func encodeValue(t *testing.T, f *querypb.Field, opts Options, v []byte, copyPhase bool) string {
	t.Helper()
	tbl, err := NewTable("commerce", "0", &binlogdatapb.FieldEvent{TableName: "alltypes", Fields: []*querypb.Field{f}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tbl.AppendRow(nil, buildRow(v), copyPhase)
	if err != nil {
		t.Fatalf("%s %q: %v", f.Name, v, err)
	}
	if !json.Valid(out) {
		t.Fatalf("%s %q: invalid JSON %s", f.Name, v, out)
	}
	prefix := `{"` + f.Name + `":`
	if !bytes.HasPrefix(out, []byte(prefix)) || out[len(out)-1] != '}' {
		t.Fatalf("%s: unexpected row %s", f.Name, out)
	}
	return string(out[len(prefix) : len(out)-1])
}

// TestTypeSamples checks every measured value of every type, in both
// phases: the binlog bytes and the copy-phase bytes of the same stored
// value must give the same, expected, JSON.
func TestTypeSamples(t *testing.T) {
	for _, col := range allTypes {
		t.Run(col.field.Name, func(t *testing.T) {
			for _, s := range col.samples {
				bin := encodeValue(t, col.field, allTypesJSON, s.value(false), false)
				cp := encodeValue(t, col.field, allTypesJSON, s.value(true), true)
				if bin != s.want {
					t.Errorf("binlog %q: got %s, want %s", s.binlog, bin, s.want)
				}
				if cp != s.want {
					t.Errorf("copy %q: got %s, want %s", s.value(true), cp, s.want)
				}
			}
			// NULL is null in every type and phase.
			for _, copyPhase := range []bool{false, true} {
				if got := encodeValue(t, col.field, allTypesJSON, nil, copyPhase); got != "null" {
					t.Errorf("NULL: got %s", got)
				}
			}
		})
	}
}

// allTypesRow builds the alltypes row that takes sample k of every column
// (wrapping around), in the given phase.
func allTypesRow(k int, copyPhase bool) (*querypb.Row, []string) {
	vals := make([][]byte, len(allTypes))
	wants := make([]string, len(allTypes))
	for i, c := range allTypes {
		s := c.samples[k%len(c.samples)]
		vals[i] = s.value(copyPhase)
		wants[i] = s.want
	}
	return buildRow(vals...), wants
}

// TestAllTypesRowBothPhases encodes whole alltypes rows as a binlog insert
// and as a snapshot row: the "after" objects must be byte-identical.
func TestAllTypesRowBothPhases(t *testing.T) {
	tbl, err := NewTable("commerce", "0", &binlogdatapb.FieldEvent{TableName: "alltypes", Fields: allTypesFields()}, allTypesJSON)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 6; k++ {
		binRow, wants := allTypesRow(k, false)
		copyRow, _ := allTypesRow(k, true)
		ins, err := tbl.Encode(OpInsert, &binlogdatapb.RowChange{After: binRow}, 1780412462)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := tbl.Encode(OpSnapshot, &binlogdatapb.RowChange{After: copyRow}, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, b := member(t, ins, "after"), member(t, snap, "after")
		if !bytes.Equal(a, b) {
			t.Fatalf("row %d differs between phases:\nbinlog %s\ncopy   %s", k, a, b)
		}
		var want strings.Builder
		want.WriteByte('{')
		for i, c := range allTypes {
			if i > 0 {
				want.WriteByte(',')
			}
			want.WriteString(`"` + c.field.Name + `":` + wants[i])
		}
		want.WriteByte('}')
		if string(a) != want.String() {
			t.Fatalf("row %d:\ngot  %s\nwant %s", k, a, want.String())
		}
		if got := member(t, ins, "key"); string(got) != `{"id":`+wants[0]+`}` {
			t.Errorf("key: %s", got)
		}
	}
}

// member returns a top-level member of a finished event.
func member(t *testing.T, ev Event, name string) json.RawMessage {
	t.Helper()
	full := ev.AppendJSON(nil, "")
	var m map[string]json.RawMessage
	if err := json.Unmarshal(full, &m); err != nil {
		t.Fatalf("invalid event %s: %v", full, err)
	}
	raw, ok := m[name]
	if !ok {
		t.Fatalf("event %s has no %q", full, name)
	}
	return raw
}

// TestTypeEdgeCases covers values beyond the measured samples: ZEROFILL
// padding of the copy phase, FLOAT rounding, odd but legal values.
func TestTypeEdgeCases(t *testing.T) {
	cases := []struct {
		name  string
		field *querypb.Field
		v     string
		copy  bool
		want  string
	}{
		{"int zerofill copy", fld("c", querypb.Type_UINT32, flUnsigned|flZerofill|flNum, 10, 0, 63, "int(10) unsigned zerofill"), "0000000042", true, "42"},
		{"int zerofill zero", fld("c", querypb.Type_UINT32, flUnsigned|flZerofill|flNum, 10, 0, 63, ""), "0000000000", true, "0"},
		{"int minus zero", fld("c", querypb.Type_INT32, flNum, 11, 0, 63, ""), "-0", false, "0"},
		{"year 2 digits", fld("c", querypb.Type_YEAR, flUnsigned|flZerofill|flNum, 2, 0, 63, "year(2)"), "05", false, "5"},
		{"decimal zerofill", fld("c", querypb.Type_DECIMAL, flUnsigned|flZerofill|flNum, 8, 2, 63, ""), "00012.50", true, `"12.50"`},
		{"decimal integer", fld("c", querypb.Type_DECIMAL, flNum, 10, 0, 63, "decimal(10,0)"), "-42", false, `"-42"`},
		{"float exact tie", fld("c", querypb.Type_FLOAT32, flNum, 12, 31, 63, "float"), "1.234565E+06", false, "1234560"},
		{"float small", fld("c", querypb.Type_FLOAT32, flNum, 12, 31, 63, "float"), "1.0000001E-07", false, "1e-7"},
		{"float negative zero", fld("c", querypb.Type_FLOAT32, flNum, 12, 31, 63, "float"), "-0E+00", false, "-0"},
		{"float 123456789", fld("c", querypb.Type_FLOAT32, flNum, 12, 31, 63, "float"), "1.2345679E+08", false, "123457000"},
		{"float copy 123457000", fld("c", querypb.Type_FLOAT32, flNum, 12, 31, 63, "float"), "123457000", true, "123457000"},
		{"float(7,3) pads", fld("c", querypb.Type_FLOAT32, flNum, 7, 3, 63, "float(7,3)"), "1.5E+00", false, "1.500"},
		{"double(10,4) copy", fld("c", querypb.Type_FLOAT64, flNum, 10, 4, 63, "double(10,4)"), "1.5000", true, "1.5000"},
		{"double zerofill copy", fld("c", querypb.Type_FLOAT64, flUnsigned|flZerofill|flNum, 22, 31, 63, ""), "000000000000000000.25", true, "0.25"},
		{"double big", fld("c", querypb.Type_FLOAT64, flNum, 22, 31, 63, "double"), "1E+21", false, "1e+21"},
		{"bit empty", fld("c", querypb.Type_BIT, flUnsigned, 8, 0, 63, "bit(8)"), "", false, "0"},
		{"partial zero date", fld("c", querypb.Type_DATE, flBinary, 10, 0, 63, "date"), "2024-00-15", false, `"2024-00-15"`},
		{"partial zero datetime", fld("c", querypb.Type_DATETIME, flBinary, 19, 0, 63, "datetime"), "2024-02-00 10:00:00", false, `"2024-02-00T10:00:00"`},
		{"time zero is midnight", fld("c", querypb.Type_TIME, flBinary, 10, 0, 63, "time"), "00:00:00", false, `"00:00:00"`},
		{"uuid uppercase text", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 144, 0, 63, "uuid"), "6F9619FF-8B86-D011-B42D-00C04FC964FF", true, `"6f9619ff-8b86-d011-b42d-00c04fc964ff"`},
		{"uuid without column_type", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 144, 0, 63, ""), unhexStr("6f9619ff8b86d011b42d00c04fc964ff"), false, `"6f9619ff-8b86-d011-b42d-00c04fc964ff"`},
		{"inet6 v4-compatible", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), unhexStr("000000000000000000000000c0000201"), false, `"::192.0.2.1"`},
		{"inet6 ::1", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), unhexStr("00000000000000000000000000000001"), false, `"::1"`},
		{"inet6 single zero group", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), unhexStr("20010db8000000010001000100010001"), false, `"2001:db8::1:1:1:1:1"`},
		{"inet6 single zero group copy", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), "2001:db8:0:1:1:1:1:1", true, `"2001:db8::1:1:1:1:1"`},
		{"inet6 first longest gap", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), "1:0:0:2:0:0:3:4", true, `"1::2:0:0:3:4"`},
		{"inet6 copy mislabelled raw", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), unhexStr("20010db8"), true, `"2001:db8::"`},
		{"inet4 one byte", fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 60, 0, 63, "inet4"), "\x0a", false, `"10.0.0.0"`},
		{"set one member", fld("c", querypb.Type_SET, flSet, 20, 0, 45, "set('x','y','z')"), "y", false, `["y"]`},
		{"set latin1", fld("c", querypb.Type_SET, flSet, 20, 0, 8, "set('é','b')"), "\xe9,b", false, `["é","b"]`},
		{"enum empty (invalid value)", fld("c", querypb.Type_ENUM, flEnum, 4, 0, 45, "enum('a')"), "", false, `""`},
		{"json invalid falls back to string", fld("c_json", querypb.Type_BLOB, flBlob|flBinary, 4294967295, 0, 46, "longtext"), "{not json", false, `"{not json"`},
		{"json pretty printed", fld("c_json", querypb.Type_BLOB, flBlob|flBinary, 4294967295, 0, 46, "longtext"), "{\n  \"a\" : [ 1 ,\t2 ]\r\n}\n", false, `{"a":[1,2]}`},
		{"json line separator escaped", fld("c_json", querypb.Type_BLOB, flBlob|flBinary, 4294967295, 0, 46, "longtext"), "[\"a\u2028b\"]", false, `["a\u2028b"]`},
		{"mysql JSON type", fld("j", querypb.Type_JSON, flBlob|flBinary, 4294967295, 0, 63, "json"), `{"a": 1}`, false, `{"a":1}`},
		{"text not flagged JSON stays string", fld("c_text", querypb.Type_TEXT, flBlob, 262140, 0, 45, "text"), `{"a":1}`, false, `"{\"a\":1}"`},
		{"binary column flagged JSON", fld("c_json", querypb.Type_BLOB, flBlob|flBinary, 65535, 0, 63, "blob"), `[1]`, false, `[1]`},
		{"binary column flagged JSON invalid", fld("c_json", querypb.Type_BLOB, flBlob|flBinary, 65535, 0, 63, "blob"), "\x00", false, `"AA=="`},
		{"vector as bytes", fld("c", querypb.Type_VECTOR, 0, 16, 0, 63, "vector(4)"), "\x01\x02", false, `"AQI="`},
		{"charset 0 varchar is text", fld("c", querypb.Type_VARCHAR, 0, 10, 0, 0, ""), "x", false, `"x"`},
		{"charset 0 blob is bytes", fld("c", querypb.Type_BLOB, flBlob, 10, 0, 0, ""), "x", false, `"eA=="`},
		{"unknown collation is utf8", fld("c", querypb.Type_VARCHAR, 0, 10, 0, 2304, ""), "é", false, `"é"`},
		{"null type", fld("c", querypb.Type_NULL_TYPE, 0, 0, 0, 63, ""), "", false, "null"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := encodeValue(t, c.field, allTypesJSON, []byte(c.v), c.copy); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

// TestBadValues: a value that cannot be of its column's type is a
// *RowError naming the column, never a panic or invalid JSON.
func TestBadValues(t *testing.T) {
	cases := []struct {
		field *querypb.Field
		v     string
	}{
		{fld("c", querypb.Type_INT32, flNum, 11, 0, 63, ""), "12a"},
		{fld("c", querypb.Type_INT32, flNum, 11, 0, 63, ""), ""},
		{fld("c", querypb.Type_INT32, flNum, 11, 0, 63, ""), "-"},
		{fld("c", querypb.Type_DECIMAL, flNum, 10, 2, 63, ""), "1.2.3"},
		{fld("c", querypb.Type_DECIMAL, flNum, 10, 2, 63, ""), "1."},
		{fld("c", querypb.Type_FLOAT64, flNum, 22, 31, 63, ""), "NaN"},
		{fld("c", querypb.Type_FLOAT64, flNum, 22, 31, 63, ""), "1E+999"},
		{fld("c", querypb.Type_FLOAT32, flNum, 12, 31, 63, ""), "3.5E+38"},
		{fld("c", querypb.Type_BIT, flUnsigned, 64, 0, 63, ""), "123456789"},
		{fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 144, 0, 63, "uuid"), "not-a-uuid-not-a-uuid-not-a-uuid-xx"},
		{fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 144, 0, 63, "uuid"), "12345678901234567"},
		{fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 60, 0, 63, "inet4"), "::1::"},
		{fld("c", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), "not an address at all"},
	}
	for _, c := range cases {
		tbl, err := NewTable("ks", "0", &binlogdatapb.FieldEvent{TableName: "t", Fields: []*querypb.Field{c.field}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tbl.Encode(OpInsert, &binlogdatapb.RowChange{After: buildRow([]byte(c.v))}, 1)
		var re *RowError
		if !asRowError(err, &re) || re.Column != "c" || re.Image != "after" || string(re.Value) != c.v {
			t.Errorf("%s %q: got %v", c.field.Type, c.v, err)
		}
	}
}
