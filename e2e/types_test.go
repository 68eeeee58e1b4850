package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtgatepb "vitess.io/vitess/go/vt/proto/vtgate"
	"vitess.io/vitess/go/vt/vtgate/vtgateconn"
)

// The type table of event/TYPES.md, end to end: a MariaDB table with one
// column of every type is written through vtgate, streamed by the gateway
// in the binlog phase (insert, update, delete) and in the copy phase, and
// every value of every row is compared with the JSON written out below.

const typesTable = "e2e_alltypes"

// typeValue is one cell: the SQL literal inserted and the JSON the gateway
// must deliver for it. Generated columns have no SQL.
type typeValue struct{ sql, want string }

func tv(sql, want string) typeValue  { return typeValue{sql, want} }
func genValue(want string) typeValue { return typeValue{"", want} }

// typeColumn is a column of the table: its definition and its value in
// each of the typeRows rows (ids 1…typeRows). Row typeNullRow holds NULL in
// every column but the key.
type typeColumn struct {
	name, ddl string
	vals      []typeValue
}

const (
	typeRows    = 6
	typeNullRow = typeRows + 1
)

// Rows: 1 maxima and typical values; 2 minima, zero dates, values whose
// binlog form loses trailing 0x00 bytes; 3 mixed (upper-case UUID, IPv4-mapped
// IPv6, JSON with spaces); 4 zeros, all-zero UUID/INET, FLOAT beyond 2^24;
// 5 the FLOAT halfway value 1234565, INET6 with a single zero group; 6 the
// halfway value 1234575 (ties round to even), an IPv4-compatible INET6, JSON
// with escapes and U+2028.
// TIMESTAMPs are written with the session time zone +05:00.
var typeColumns = []typeColumn{
	{"c_tinyint", "tinyint", []typeValue{tv("127", "127"), tv("-128", "-128"), tv("-1", "-1"), tv("0", "0"), tv("1", "1"), tv("100", "100")}},
	{"c_tinyint_u", "tinyint unsigned", []typeValue{tv("255", "255"), tv("0", "0"), tv("1", "1"), tv("0", "0"), tv("128", "128"), tv("7", "7")}},
	{"c_bool", "bool", []typeValue{tv("true", "1"), tv("false", "0"), tv("1", "1"), tv("0", "0"), tv("1", "1"), tv("0", "0")}},
	{"c_smallint", "smallint", []typeValue{tv("32767", "32767"), tv("-32768", "-32768"), tv("0", "0"), tv("-1", "-1"), tv("1", "1"), tv("12345", "12345")}},
	{"c_smallint_u", "smallint unsigned", []typeValue{tv("65535", "65535"), tv("0", "0"), tv("1", "1"), tv("0", "0"), tv("32768", "32768"), tv("2", "2")}},
	{"c_mediumint", "mediumint", []typeValue{tv("8388607", "8388607"), tv("-8388608", "-8388608"), tv("-1", "-1"), tv("0", "0"), tv("1", "1"), tv("2", "2")}},
	{"c_mediumint_u", "mediumint unsigned", []typeValue{tv("16777215", "16777215"), tv("0", "0"), tv("1", "1"), tv("0", "0"), tv("8388608", "8388608"), tv("3", "3")}},
	{"c_int", "int", []typeValue{tv("2147483647", "2147483647"), tv("-2147483648", "-2147483648"), tv("42", "42"), tv("0", "0"), tv("-3", "-3"), tv("7", "7")}},
	{"c_int_u", "int unsigned", []typeValue{tv("4294967295", "4294967295"), tv("0", "0"), tv("1", "1"), tv("0", "0"), tv("2147483648", "2147483648"), tv("5", "5")}},
	{"c_bigint", "bigint", []typeValue{tv("9223372036854775807", "9223372036854775807"), tv("-9223372036854775808", "-9223372036854775808"),
		tv("9007199254740993", "9007199254740993"), tv("0", "0"), tv("-9007199254740993", "-9007199254740993"), tv("1", "1")}},
	{"c_bigint_u", "bigint unsigned", []typeValue{tv("18446744073709551615", "18446744073709551615"), tv("9223372036854775808", "9223372036854775808"),
		tv("9007199254740993", "9007199254740993"), tv("0", "0"), tv("1", "1"), tv("18446744073709551614", "18446744073709551614")}},
	{"c_int_zf", "int(6) unsigned zerofill", []typeValue{tv("42", "42"), tv("0", "0"), tv("123456", "123456"), tv("1", "1"), tv("1234567", "1234567"), tv("7", "7")}},
	{"c_dec_zf", "decimal(8,2) unsigned zerofill", []typeValue{tv("12.5", `"12.50"`), tv("0.05", `"0.05"`), tv("999999.99", `"999999.99"`),
		tv("0", `"0.00"`), tv("1", `"1.00"`), tv("100.1", `"100.10"`)}},
	{"c_decimal", "decimal(30,10)", []typeValue{tv("99999999999999999999.9999999999", `"99999999999999999999.9999999999"`),
		tv("-1.5", `"-1.5000000000"`), tv("0.0000000001", `"0.0000000001"`), tv("0", `"0.0000000000"`),
		tv("-99999999999999999999.9999999999", `"-99999999999999999999.9999999999"`), tv("12345.6789", `"12345.6789000000"`)}},
	{"c_decimal_u", "decimal(5,2) unsigned", []typeValue{tv("999.99", `"999.99"`), tv("0", `"0.00"`), tv("0.5", `"0.50"`), tv("1", `"1.00"`),
		tv("0.01", `"0.01"`), tv("123.45", `"123.45"`)}},
	{"c_float", "float", []typeValue{tv("3.40282e38", "3.40282e+38"), tv("-1.17549e-38", "-1.17549e-38"), tv("1.1", "1.1"),
		tv("16777216", "16777200"), tv("1234565", "1234560"), tv("1234575", "1234580")}},
	{"c_float_p", "float(7,3)", []typeValue{tv("1234.568", "1234.568"), tv("-0.5", "-0.500"), tv("9999.999", "9999.999"), tv("0", "0.000"),
		tv("1.5", "1.500"), tv("-9999.999", "-9999.999")}},
	{"c_double", "double", []typeValue{tv("1.7976931348623157e308", "1.7976931348623157e+308"), tv("2.2250738585072014e-308", "2.2250738585072014e-308"),
		tv("0.1", "0.1"), tv("1e-7", "1e-7"), tv("1.2345678901234568e17", "123456789012345680"), tv("1e21", "1e+21")}},
	{"c_dbl_p", "double(10,4)", []typeValue{tv("3.14159265", "3.1416"), tv("-1.5", "-1.5000"), tv("0", "0.0000"), tv("0.5", "0.5000"),
		tv("123456.7891", "123456.7891"), tv("-0.0001", "-0.0001")}},
	{"c_bit1", "bit(1)", []typeValue{tv("b'1'", "1"), tv("b'0'", "0"), tv("1", "1"), tv("0", "0"), tv("b'1'", "1"), tv("b'0'", "0")}},
	{"c_bit12", "bit(12)", []typeValue{tv("b'101010101010'", "2730"), tv("b'1'", "1"), tv("b'111111111111'", "4095"), tv("0", "0"),
		tv("b'100000000000'", "2048"), tv("255", "255")}},
	{"c_bit64", "bit(64)", []typeValue{tv("x'FFFFFFFFFFFFFFFF'", "18446744073709551615"), tv("b'1000001'", "65"),
		tv("x'8000000000000000'", "9223372036854775808"), tv("0", "0"), tv("1", "1"), tv("x'0123456789ABCDEF'", "81985529216486895")}},
	{"c_date", "date", []typeValue{tv("'9999-12-31'", `"9999-12-31"`), tv("'0000-00-00'", "null"), tv("'2024-02-29'", `"2024-02-29"`),
		tv("'1000-01-01'", `"1000-01-01"`), tv("'2024-06-01'", `"2024-06-01"`), tv("'2024-00-15'", `"2024-00-15"`)}},
	{"c_time", "time", []typeValue{tv("'838:59:59'", `"838:59:59"`), tv("'-838:59:59'", `"-838:59:59"`), tv("'-01:02:03'", `"-01:02:03"`),
		tv("'00:00:00'", `"00:00:00"`), tv("'-00:00:01'", `"-00:00:01"`), tv("'24:00:00'", `"24:00:00"`)}},
	{"c_time6", "time(6)", []typeValue{tv("'838:59:59.999999'", `"838:59:59.999999"`), tv("'-838:59:59.999999'", `"-838:59:59.999999"`),
		tv("'-00:00:01.5'", `"-00:00:01.500000"`), tv("'00:00:00.000001'", `"00:00:00.000001"`), tv("'-00:00:00.000001'", `"-00:00:00.000001"`),
		tv("'00:00:00'", `"00:00:00.000000"`)}},
	{"c_datetime", "datetime", []typeValue{tv("'9999-12-31 23:59:59'", `"9999-12-31T23:59:59"`), tv("'0000-00-00 00:00:00'", "null"),
		tv("'2024-06-01 12:34:56'", `"2024-06-01T12:34:56"`), tv("'1000-01-01 00:00:00'", `"1000-01-01T00:00:00"`),
		tv("'2024-02-29 23:59:59'", `"2024-02-29T23:59:59"`), tv("'1970-01-01 00:00:00'", `"1970-01-01T00:00:00"`)}},
	{"c_datetime6", "datetime(6)", []typeValue{tv("'2024-06-01 12:34:56.000120'", `"2024-06-01T12:34:56.000120"`),
		tv("'0000-00-00 00:00:00.000000'", "null"), tv("'2024-01-01 00:00:00'", `"2024-01-01T00:00:00.000000"`),
		tv("'9999-12-31 23:59:59.999999'", `"9999-12-31T23:59:59.999999"`), tv("'2024-06-01 12:34:56.5'", `"2024-06-01T12:34:56.500000"`),
		tv("'1000-01-01 00:00:00.000001'", `"1000-01-01T00:00:00.000001"`)}},
	// Written in time zone +05:00, delivered in UTC.
	{"c_ts", "timestamp null", []typeValue{tv("'2024-06-01 12:34:56'", `"2024-06-01T07:34:56Z"`), tv("'0000-00-00 00:00:00'", "null"),
		tv("'2038-01-19 08:14:07'", `"2038-01-19T03:14:07Z"`), tv("'1970-01-01 05:00:01'", `"1970-01-01T00:00:01Z"`),
		tv("'2024-01-01 02:00:00'", `"2023-12-31T21:00:00Z"`), tv("'2024-06-01 05:00:00'", `"2024-06-01T00:00:00Z"`)}},
	{"c_ts3", "timestamp(3) null", []typeValue{tv("'2024-06-01 12:34:56.789'", `"2024-06-01T07:34:56.789Z"`), tv("'0000-00-00 00:00:00.000'", "null"),
		tv("'2038-01-19 08:14:07.999'", `"2038-01-19T03:14:07.999Z"`), tv("'1970-01-01 05:00:01'", `"1970-01-01T00:00:01.000Z"`),
		tv("'2024-01-01 02:00:00.001'", `"2023-12-31T21:00:00.001Z"`), tv("'2024-06-01 05:00:00.5'", `"2024-06-01T00:00:00.500Z"`)}},
	{"c_year", "year", []typeValue{tv("2155", "2155"), tv("'0000'", "0"), tv("70", "1970"), tv("1901", "1901"), tv("2024", "2024"), tv("'69'", "2069")}},
	{"c_char", "char(5)", []typeValue{tv("'abcde'", `"abcde"`), tv("'ab  '", `"ab"`), tv("'a b '", `"a b"`), tv("''", `""`),
		tv("'é😀'", `"é😀"`), tv("'  x'", `"  x"`)}},
	{"c_varchar", "varchar(50) collate utf8mb4_unicode_ci", []typeValue{tv("'héllo 😀 wörld 🚀'", `"héllo 😀 wörld 🚀"`),
		tv("'trailing  '", `"trailing  "`), tv("'ünï'", `"ünï"`), tv("''", `""`), tv("'Ω≈ç√'", `"Ω≈ç√"`),
		tv("'line\u2028sep'", `"line\u2028sep"`)}},
	{"c_latin1", "varchar(10) character set latin1", []typeValue{tv("'café'", `"café"`), tv("'€uro ÿ'", `"€uro ÿ"`), tv("''", `""`),
		tv("'Ñ'", `"Ñ"`), tv("'naïve'", `"naïve"`), tv("'«\u0081»'", "\"«\u0081»\"")}},
	{"c_text", "text", []typeValue{tv(`'line1\nline2 "q" ''s'' \\ tab\t'`, `"line1\nline2 \"q\" 's' \\ tab\t"`), tv("''", `""`),
		tv("'😀'", `"😀"`), tv(`'nul\0 bs\b cr\r'`, `"nul\u0000 bs\b cr\r"`), tv("'x'", `"x"`), tv("'ünï'", `"ünï"`)}},
	{"c_mediumtext", "mediumtext", []typeValue{tv("'😀'", `"😀"`), tv(`'multi\nline'`, `"multi\nline"`), tv("'x'", `"x"`), tv("''", `""`),
		tv("'ü'", `"ü"`), tv(`'{"not":"json"}'`, `"{\"not\":\"json\"}"`)}},
	{"c_varchar_bin", "varchar(10) collate utf8mb4_bin", []typeValue{tv("'Ab '", `"Ab "`), tv("''", `""`), tv("'ÄB'", `"ÄB"`), tv("'x'", `"x"`),
		tv("'😀'", `"😀"`), tv("' '", `" "`)}},
	{"c_char_bin", "char(5) collate utf8mb4_bin", []typeValue{tv("'ab '", `"ab"`), tv("'ab'", `"ab"`), tv("'é'", `"é"`), tv("''", `""`),
		tv("'abcde'", `"abcde"`), tv("' a'", `" a"`)}},
	{"c_text_bin", "text collate utf8mb4_bin", []typeValue{tv("'é'", `"é"`), tv("''", `""`), tv("'Bin Text'", `"Bin Text"`), tv("'x'", `"x"`),
		tv("'😀'", `"😀"`), tv(`'tab\t'`, `"tab\t"`)}},
	{"c_binary", "binary(4)", []typeValue{tv("x'00FF10'", `"AP8QAA=="`), tv("''", `"AAAAAA=="`), tv("x'41'", `"QQAAAA=="`),
		tv("x'00000000'", `"AAAAAA=="`), tv("x'FFFFFFFF'", `"/////w=="`), tv("'abcd'", `"YWJjZA=="`)}},
	{"c_varbinary", "varbinary(10)", []typeValue{tv("x'00FF10'", `"AP8Q"`), tv("''", `""`), tv("x'0000'", `"AAA="`), tv("x'00'", `"AA=="`),
		tv("'hello'", `"aGVsbG8="`), tv("x'FF'", `"/w=="`)}},
	{"c_blob", "blob", []typeValue{tv("x'DEADBEEF00'", `"3q2+7wA="`), tv("''", `""`), tv("x'00'", `"AA=="`), tv("x'FFFE'", `"//4="`),
		tv("'abc'", `"YWJj"`), tv("x'00FF10'", `"AP8Q"`)}},
	{"c_tinyblob", "tinyblob", []typeValue{tv("x'00'", `"AA=="`), tv("''", `""`), tv("x'FF'", `"/w=="`), tv("x'0102'", `"AQI="`),
		tv("'z'", `"eg=="`), tv("x'000000'", `"AAAA"`)}},
	{"c_enum", "enum('a','b','c')", []typeValue{tv("'c'", `"c"`), tv("'a'", `"a"`), tv("'b'", `"b"`), tv("'a'", `"a"`), tv("'b'", `"b"`), tv("'c'", `"c"`)}},
	{"c_set", "set('x','y','z')", []typeValue{tv("'z,x'", `["x","z"]`), tv("''", `[]`), tv("'y,x'", `["x","y"]`), tv("'x,y,z'", `["x","y","z"]`),
		tv("'y'", `["y"]`), tv("'z'", `["z"]`)}},
	{"c_json", "json", []typeValue{tv(`'{"a":[1,2.5,"x"],"b":null}'`, `{"a":[1,2.5,"x"],"b":null}`), tv("'[]'", `[]`),
		tv(`'{"k": "ü😀", "n": 1e3, "z": 1.0}'`, `{"k":"ü😀","n":1e3,"z":1.0}`), tv(`'"just a string"'`, `"just a string"`),
		tv("'1'", `1`),
		tv("'{\"nested\": {\"arr\": [true, false, null, {}], \"esc\": \"q\\\\\"\\\\u00e9\\\\n\", \"sep\": \"a\u2028b\"}}'",
			`{"nested":{"arr":[true,false,null,{}],"esc":"q\"\u00e9\n","sep":"a\u2028b"}}`)}},
	{"c_uuid", "uuid", []typeValue{tv("'123e4567-e89b-12d3-a456-426614174000'", `"123e4567-e89b-12d3-a456-426614174000"`),
		tv("'00000000-0000-0000-0000-000000000100'", `"00000000-0000-0000-0000-000000000100"`),
		tv("'6F9619FF-8B86-D011-B42D-00C04FC964FF'", `"6f9619ff-8b86-d011-b42d-00c04fc964ff"`),
		tv("'00000000-0000-0000-0000-000000000000'", `"00000000-0000-0000-0000-000000000000"`),
		tv("'ffffffff-ffff-ffff-ffff-ffffffffffff'", `"ffffffff-ffff-ffff-ffff-ffffffffffff"`),
		tv("'10000000-0000-0000-0000-000000000000'", `"10000000-0000-0000-0000-000000000000"`)}},
	{"c_inet4", "inet4", []typeValue{tv("'192.168.0.1'", `"192.168.0.1"`), tv("'192.168.0.0'", `"192.168.0.0"`), tv("'10.0.0.255'", `"10.0.0.255"`),
		tv("'0.0.0.0'", `"0.0.0.0"`), tv("'255.255.255.255'", `"255.255.255.255"`), tv("'1.0.0.0'", `"1.0.0.0"`)}},
	{"c_inet6", "inet6", []typeValue{tv("'2001:db8::1'", `"2001:db8::1"`), tv("'2001:db8::'", `"2001:db8::"`),
		tv("'::ffff:192.0.2.1'", `"::ffff:192.0.2.1"`), tv("'::'", `"::"`),
		tv("'2001:db8:0:1:1:1:1:1'", `"2001:db8::1:1:1:1:1"`), tv("'::192.0.2.1'", `"::192.0.2.1"`)}},
	{"c_point", "point", []typeValue{tv("point(1, 2)", `"AAAAAAEBAAAAAAAAAAAA8D8AAAAAAAAAQA=="`),
		tv("point(-1.5, 0)", `"AAAAAAEBAAAAAAAAAAAA+L8AAAAAAAAAAA=="`),
		tv("ST_GeomFromText('POINT(3 4)', 4326)", `"5hAAAAEBAAAAAAAAAAAACEAAAAAAAAAQQA=="`),
		tv("point(0, 0)", `"AAAAAAEBAAAAAAAAAAAAAAAAAAAAAAAAAA=="`), tv("point(1, 2)", `"AAAAAAEBAAAAAAAAAAAA8D8AAAAAAAAAQA=="`),
		tv("point(-1.5, 0)", `"AAAAAAEBAAAAAAAAAAAA+L8AAAAAAAAAAA=="`)}},
	{"c_gen_int", "int as (c_int div 2) virtual", []typeValue{genValue("1073741823"), genValue("-1073741824"), genValue("21"), genValue("0"), genValue("-1"), genValue("3")}},
	{"c_gen_varchar", "varchar(60) as (upper(c_varchar)) stored", []typeValue{genValue(`"HÉLLO 😀 WÖRLD 🚀"`), genValue(`"TRAILING  "`), genValue(`"ÜNÏ"`),
		genValue(`""`), genValue(`"Ω≈Ç√"`), genValue(`"LINE\u2028SEP"`)}},
}

// typeUpdate changes row 1; typeUpdated is what the row holds afterwards.
const typeUpdate = "update " + typesTable + " set c_int = 42, c_json = json_set(c_json, '$.b', 1), c_set = 'x,y,z'," +
	" c_inet6 = '::', c_uuid = '550e8400-e29b-41d4-a716-446655440000', c_float = 1234567 where id = 1"

var typeUpdated = map[string]string{
	"c_int":     "42",
	"c_gen_int": "21",
	"c_json":    `{"a":[1,2.5,"x"],"b":1}`,
	"c_set":     `["x","y","z"]`,
	"c_inet6":   `"::"`,
	"c_uuid":    `"550e8400-e29b-41d4-a716-446655440000"`,
	"c_float":   "1234570",
}

// typeCell is one expected member of a row image.
type typeCell struct{ col, want string }

// typeExpected returns row id's expected image, in column order.
func typeExpected(id int) []typeCell {
	cells := []typeCell{{"id", strconv.Itoa(id)}}
	for _, c := range typeColumns {
		want := "null"
		if id != typeNullRow {
			want = c.vals[id-1].want
		}
		cells = append(cells, typeCell{c.name, want})
	}
	return cells
}

// typeObject is the JSON object of an image: members in column order.
func typeObject(cells []typeCell) []byte {
	b := []byte{'{'}
	for i, c := range cells {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, c.col)
		b = append(b, ':')
		b = append(b, c.want...)
	}
	return append(b, '}')
}

func typeCreateTable() string {
	var sb strings.Builder
	sb.WriteString("create table " + typesTable + " (\n  id int not null primary key")
	for _, c := range typeColumns {
		fmt.Fprintf(&sb, ",\n  %s %s", c.name, c.ddl)
	}
	sb.WriteString("\n) engine=InnoDB default charset=utf8mb4")
	return sb.String()
}

// freshTypesTable creates the type table anew in commerce and returns a
// statement runner on one connection (session settings such as time_zone
// hold for the statements after them), closed when the test ends.
func freshTypesTable(t *testing.T, ctx context.Context) func(q string) {
	t.Helper()
	db, err := cluster.OpenDB("commerce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	exec := func(q string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("drop table if exists " + typesTable)
	exec(typeCreateTable())
	return exec
}

func typeInsert(id int) string {
	cols, vals := []string{"id"}, []string{strconv.Itoa(id)}
	for _, c := range typeColumns {
		if c.vals[0].sql == "" { // generated
			continue
		}
		v := "null"
		if id != typeNullRow {
			v = c.vals[id-1].sql
		}
		cols = append(cols, c.name)
		vals = append(vals, v)
	}
	return "insert into " + typesTable + " (" + strings.Join(cols, ", ") + ") values (" + strings.Join(vals, ", ") + ")"
}

// typeEvent is a delivered change (or control) event with its images kept as
// the exact bytes the gateway wrote.
type typeEvent struct {
	Type     string          `json:"type"`
	Op       string          `json:"op"`
	Keyspace string          `json:"keyspace"`
	Shard    string          `json:"shard"`
	Table    string          `json:"table"`
	Key      json.RawMessage `json:"key"`
	Before   json.RawMessage `json:"before"`
	After    json.RawMessage `json:"after"`
	CommitTS json.RawMessage `json:"commit_ts"`
	raw      []byte
}

func (c typeEvent) String() string { return string(c.raw) }

// body is the event without its cursor member, which differs between
// streams and transports.
func (c typeEvent) body() string {
	s := string(c.raw)
	if i := strings.LastIndex(s, `,"cursor":"`); i >= 0 {
		return s[:i] + "}"
	}
	return s
}

// keyID returns the id in the event's key, 0 if there is none.
func (c typeEvent) keyID() int {
	var k struct {
		ID int `json:"id"`
	}
	if json.Unmarshal(c.Key, &k) != nil {
		return 0
	}
	return k.ID
}

// readTypeEvents reads events until stop returns true for one; it returns
// the change events, control events left out.
func readTypeEvents(ctx context.Context, c client, stop func(typeEvent) bool) ([]typeEvent, error) {
	var out []typeEvent
	for {
		e, err := c.next(ctx)
		if err != nil {
			return out, fmt.Errorf("after %d changes: %w", len(out), err)
		}
		var ch typeEvent
		if err := json.Unmarshal(e.Raw, &ch); err != nil {
			return out, fmt.Errorf("bad event %s: %w", e.Raw, err)
		}
		ch.raw = e.Raw
		if ch.Type == "change" {
			out = append(out, ch)
		}
		if stop(ch) {
			return out, nil
		}
	}
}

func isTypeChange(op string, id int) func(typeEvent) bool {
	return func(c typeEvent) bool { return c.Type == "change" && c.Op == op && c.keyID() == id }
}

// checkImage compares an image with the expected cells, value by value,
// then as a whole (member order, nothing extra).
func checkImage(t *testing.T, what string, got json.RawMessage, want []typeCell) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(got, &m); err != nil || m == nil {
		t.Errorf("%s: not an object: %s", what, got)
		return
	}
	bad := false
	for _, c := range want {
		v, ok := m[c.col]
		switch {
		case !ok:
			t.Errorf("%s: column %s missing", what, c.col)
			bad = true
		case string(v) != c.want:
			t.Errorf("%s: %s = %s, want %s", what, c.col, v, c.want)
			bad = true
		}
	}
	if len(m) != len(want) {
		t.Errorf("%s: %d members, want %d: %s", what, len(m), len(want), got)
		bad = true
	}
	if w := typeObject(want); !bad && !bytes.Equal(got, w) {
		t.Errorf("%s: object differs from the expected one (member order?)\n got %s\nwant %s", what, got, w)
	}
}

func checkEnvelope(t *testing.T, what string, c typeEvent, op string, id int, binlog bool) {
	t.Helper()
	if c.Type != "change" || c.Op != op || c.Keyspace != "commerce" || c.Shard != "0" || c.Table != typesTable {
		t.Errorf("%s: envelope %s/%s %s/%s %s, want change/%s commerce/0 %s", what, c.Type, c.Op, c.Keyspace, c.Shard, c.Table, op, typesTable)
	}
	if want := fmt.Sprintf(`{"id":%d}`, id); string(c.Key) != want {
		t.Errorf("%s: key %s, want %s", what, c.Key, want)
	}
	if (op == "insert" || op == "snapshot") && string(c.Before) != "null" {
		t.Errorf("%s: before %s, want null", what, c.Before)
	}
	if op == "delete" && string(c.After) != "null" {
		t.Errorf("%s: after %s, want null", what, c.After)
	}
	if !binlog {
		if string(c.CommitTS) != "null" {
			t.Errorf("%s: commit_ts %s, want null", what, c.CommitTS)
		}
		return
	}
	var s string
	var ts time.Time
	err := json.Unmarshal(c.CommitTS, &s)
	if err == nil {
		ts, err = time.Parse("2006-01-02T15:04:05Z", s)
	}
	if err != nil || time.Since(ts) > 10*time.Minute || time.Until(ts) > time.Minute {
		t.Errorf("%s: commit_ts %s is not a recent whole-second UTC time (%v)", what, c.CommitTS, err)
	}
}

// TestTypesEndToEnd streams every MariaDB column type through the gateway
// and checks each delivered value against the type table, in the binlog
// phase (HTTP pull, and WebSocket for the same bytes) and in the copy
// phase, which must agree byte for byte.
func TestTypesEndToEnd(t *testing.T) {
	needE2E(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, c := range typeColumns {
		if len(c.vals) != typeRows {
			t.Fatalf("column %s has %d values, want %d", c.name, len(c.vals), typeRows)
		}
	}

	exec := freshTypesTable(t, ctx)

	g := startGateway(t, withDataDir(t)...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	binStream := "types-binlog-" + suffix
	g.createStream(t, map[string]any{"name": binStream, "keyspace": "commerce", "tables": []string{typesTable}})
	cursor := initialCursor(t, ctx, g, binStream)
	pull, err := connectPull(ctx, g, binStream, "", cursor)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := connectWS(ctx, g, binStream, "", cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()

	// Binlog phase: inserts, written in time zone +05:00.
	exec("set time_zone = '+05:00'")
	for id := 1; id <= typeNullRow; id++ {
		exec(typeInsert(id))
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	inserts, err := readTypeEvents(rctx, pull, isTypeChange("insert", typeNullRow))
	if err != nil {
		t.Fatalf("binlog phase (pull): %v", err)
	}
	if len(inserts) != typeNullRow {
		t.Fatalf("binlog phase: %d changes, want %d inserts: %v", len(inserts), typeNullRow, inserts)
	}
	binlogAfter := map[int]json.RawMessage{}
	for i, c := range inserts {
		id := i + 1
		what := fmt.Sprintf("binlog insert id=%d", id)
		checkEnvelope(t, what, c, "insert", id, true)
		checkImage(t, what, c.After, typeExpected(id))
		binlogAfter[id] = c.After
	}
	checkJSONEmbedded(t, "binlog", binlogAfter)
	wsInserts, err := readTypeEvents(rctx, ws, isTypeChange("insert", typeNullRow))
	if err != nil {
		t.Fatalf("binlog phase (ws): %v", err)
	}
	checkSameEvents(t, "binlog inserts, ws vs pull", wsInserts, inserts)

	// Copy phase: a snapshot of the same rows.
	snapStream := "types-snapshot-" + suffix
	g.createStream(t, map[string]any{"name": snapStream, "keyspace": "commerce", "tables": []string{typesTable}, "start": "snapshot"})
	snap, err := connectPull(ctx, g, snapStream, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	snapRows, err := readTypeEvents(sctx, snap, func(c typeEvent) bool { return c.Type == "snapshot_complete" })
	if err != nil {
		t.Fatalf("copy phase: %v", err)
	}
	if len(snapRows) != typeNullRow {
		t.Fatalf("copy phase: %d changes before snapshot_complete, want %d: %v", len(snapRows), typeNullRow, snapRows)
	}
	snapAfter := map[int]json.RawMessage{}
	for i, c := range snapRows {
		id := i + 1
		what := fmt.Sprintf("snapshot id=%d", id)
		checkEnvelope(t, what, c, "snapshot", id, false)
		checkImage(t, what, c.After, typeExpected(id))
		snapAfter[id] = c.After
		if !bytes.Equal(c.After, binlogAfter[id]) {
			t.Errorf("id=%d: copy-phase after differs from binlog-phase after\n copy   %s\n binlog %s", id, c.After, binlogAfter[id])
			diffImages(t, id, c.After, binlogAfter[id])
		}
	}
	checkJSONEmbedded(t, "snapshot", snapAfter)
	checkCopyPhaseSpelling(t, ctx)

	// Binlog phase: an update (full before and after images) and a delete.
	exec(typeUpdate)
	exec("delete from " + typesTable + " where id = 2")
	uctx, ucancel := context.WithTimeout(ctx, time.Minute)
	defer ucancel()
	tail, err := readTypeEvents(uctx, pull, isTypeChange("delete", 2))
	if err != nil {
		t.Fatalf("update/delete (pull): %v", err)
	}
	if len(tail) != 2 {
		t.Fatalf("update/delete: %d changes, want 2: %v", len(tail), tail)
	}
	upd, del := tail[0], tail[1]
	checkEnvelope(t, "update id=1", upd, "update", 1, true)
	checkImage(t, "update id=1 before", upd.Before, typeExpected(1))
	updated := typeExpected(1)
	for i, c := range updated {
		if w, ok := typeUpdated[c.col]; ok {
			updated[i].want = w
		}
	}
	checkImage(t, "update id=1 after", upd.After, updated)
	if !bytes.Equal(upd.Before, binlogAfter[1]) {
		t.Errorf("update before image differs from the insert's after image\n before %s\n insert %s", upd.Before, binlogAfter[1])
	}
	checkEnvelope(t, "delete id=2", del, "delete", 2, true)
	checkImage(t, "delete id=2 before", del.Before, typeExpected(2))
	if !bytes.Equal(del.Before, binlogAfter[2]) {
		t.Errorf("delete before image differs from the insert's after image\n before %s\n insert %s", del.Before, binlogAfter[2])
	}
	wsTail, err := readTypeEvents(uctx, ws, isTypeChange("delete", 2))
	if err != nil {
		t.Fatalf("update/delete (ws): %v", err)
	}
	checkSameEvents(t, "update/delete, ws vs pull", wsTail, tail)
	// The snapshot stream continues with the binlog: same events.
	snapTail, err := readTypeEvents(uctx, snap, isTypeChange("delete", 2))
	if err != nil {
		t.Fatalf("update/delete (snapshot stream): %v", err)
	}
	checkSameEvents(t, "update/delete, snapshot stream vs binlog stream", snapTail, tail)
	t.Logf("%d columns x %d rows checked in both phases, update and delete, in %v",
		len(typeColumns)+1, typeNullRow, time.Since(start).Round(time.Millisecond))
}

// checkSameEvents asserts two readers got the same events, byte for byte
// but for their cursors.
func checkSameEvents(t *testing.T, what string, got, want []typeEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d changes, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if got[i].body() != want[i].body() {
			t.Errorf("%s: event %d differs\n got %s\nwant %s", what, i, got[i].body(), want[i].body())
		}
	}
}

// diffImages names the columns where two images differ.
func diffImages(t *testing.T, id int, copyImg, binlogImg json.RawMessage) {
	t.Helper()
	var a, b map[string]json.RawMessage
	json.Unmarshal(copyImg, &a)
	json.Unmarshal(binlogImg, &b)
	for _, c := range typeExpected(id) {
		if string(a[c.col]) != string(b[c.col]) {
			t.Errorf("id=%d %s: copy %s, binlog %s", id, c.col, a[c.col], b[c.col])
		}
	}
}

// checkJSONEmbedded asserts the MariaDB JSON column (LONGTEXT with a
// json_valid CHECK) is embedded as JSON, not delivered as a string holding
// JSON text: objects and arrays arrive as objects and arrays.
func checkJSONEmbedded(t *testing.T, phase string, after map[int]json.RawMessage) {
	t.Helper()
	kinds := map[int]string{1: "object", 2: "array", 3: "object", 4: "string", 5: "number", 6: "object", typeNullRow: "null"}
	for id, want := range kinds {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(after[id], &m); err != nil {
			t.Errorf("%s id=%d: %v", phase, id, err)
			continue
		}
		var v any
		if err := json.Unmarshal(m["c_json"], &v); err != nil {
			t.Errorf("%s id=%d: c_json %s: %v", phase, id, m["c_json"], err)
			continue
		}
		got := "null"
		switch v.(type) {
		case map[string]any:
			got = "object"
		case []any:
			got = "array"
		case string:
			got = "string"
		case float64:
			got = "number"
		}
		if got != want {
			t.Errorf("%s id=%d: c_json arrived as a %s (%s), want an embedded %s", phase, id, got, m["c_json"], want)
		}
	}
}

// checkCopyPhaseSpelling reads the table's copy phase with a plain VStream
// client and checks the raw values the encoder's normalizations are built
// for: ZEROFILL padding, FLOAT shown with 6 significant digits (the exact
// halfway value 1234565 rounds to even), MariaDB's INET6 spellings. The
// gateway's JSON for these is checked above, identical in both phases.
func checkCopyPhaseSpelling(t *testing.T, ctx context.Context) {
	t.Helper()
	want := map[int]map[string]string{
		1: {"c_int_zf": "000042", "c_dec_zf": "000012.50"},
		2: {"c_int_zf": "000000", "c_dec_zf": "000000.05"},
		4: {"c_float": "16777200"},
		5: {"c_int_zf": "1234567", "c_float": "1234560", "c_inet6": "2001:db8::1:1:1:1:1"},
		6: {"c_float": "1234580", "c_inet6": "::192.0.2.1"},
	}
	got, err := rawCopyPhase(ctx)
	if err != nil {
		t.Errorf("raw copy phase: %v", err)
		return
	}
	for id, cols := range want {
		for col, w := range cols {
			if g, ok := got[id][col]; !ok || g != w {
				t.Errorf("raw copy phase id=%d %s = %q (present %v), want %q", id, col, g, ok, w)
			}
		}
	}
}

// rawCopyPhase returns the copy-phase values of the table as vtgate
// delivers them, by id and column.
func rawCopyPhase(ctx context.Context) (map[int]map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := vtgateconn.Dial(ctx, cluster.VtgateAddr())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	r, err := conn.VStream(ctx, topodatapb.TabletType_PRIMARY,
		&binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "commerce", Shard: "0", Gtid: ""}}},
		&binlogdatapb.Filter{Rules: []*binlogdatapb.Rule{{Match: typesTable, Filter: "select * from " + typesTable}}},
		&vtgatepb.VStreamFlags{ExcludeKeyspaceFromTableName: true})
	if err != nil {
		return nil, err
	}
	out := map[int]map[string]string{}
	var fields []*querypb.Field
	for {
		evs, err := r.Recv()
		if err != nil {
			return out, err
		}
		for _, e := range evs {
			switch e.Type {
			case binlogdatapb.VEventType_FIELD:
				fields = e.FieldEvent.Fields
			case binlogdatapb.VEventType_ROW:
				for _, rc := range e.RowEvent.RowChanges {
					vals := sqltypes.MakeRowTrusted(fields, rc.After)
					row := map[string]string{}
					for i, f := range fields {
						if !vals[i].IsNull() {
							row[f.Name] = vals[i].ToString()
						}
					}
					id, _ := strconv.Atoi(row["id"])
					out[id] = row
				}
			case binlogdatapb.VEventType_COPY_COMPLETED:
				return out, nil
			}
		}
	}
}
