package event

import (
	"encoding/hex"

	querypb "vitess.io/vitess/go/vt/proto/query"
)

// The alltypes table and its values as a MariaDB 10.11 VStream delivers
// them through Vitess v0.24.4, binlog phase and copy phase, as measured in
// shared/vstream-types.md. Keep these faithful: the end-to-end test streams
// the same table from a real cluster and compares against this encoder.

// Field flags as they appear in the measured FIELD events.
const (
	flNum      = 32768
	flUnsigned = 32
	flBinary   = 128
	flBlob     = 16
	flZerofill = 64
	flEnum     = 256
	flSet      = 2048
	flPKAuto   = 49667 // NOT_NULL|PRI_KEY|AUTO_INCREMENT|PART_KEY|NUM
)

// sample is one value of a column: the bytes of querypb.Row in each phase
// (copyV nil means identical to binlog) and the JSON value expected.
type sample struct {
	binlog []byte
	copyV  []byte
	want   string
}

type typeColumn struct {
	field   *querypb.Field
	samples []sample
}

func fld(name string, typ querypb.Type, flags, length, decimals, cs uint32, columnType string) *querypb.Field {
	return &querypb.Field{Name: name, Type: typ, Flags: flags, ColumnLength: length,
		Decimals: decimals, Charset: cs, ColumnType: columnType, Table: "alltypes", OrgTable: "alltypes",
		Database: "vt_commerce", OrgName: name}
}

func same(v, want string) sample { return sample{binlog: []byte(v), want: want} }

func phases(binlog, copyV, want string) sample {
	return sample{binlog: []byte(binlog), copyV: []byte(copyV), want: want}
}

func unhexStr(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// allTypes is the measured alltypes table, column by column, in table order.
var allTypes = []typeColumn{
	{fld("id", querypb.Type_INT32, flPKAuto, 11, 0, 63, "int(11)"), []sample{same("1", "1"), same("2", "2")}},
	{fld("c_tinyint", querypb.Type_INT8, flNum, 4, 0, 63, "tinyint(4)"),
		[]sample{same("127", "127"), same("-128", "-128"), same("-1", "-1")}},
	{fld("c_tinyint_u", querypb.Type_UINT8, flUnsigned|flNum, 3, 0, 63, "tinyint(3) unsigned"),
		[]sample{same("255", "255"), same("0", "0")}},
	{fld("c_bool", querypb.Type_INT8, flNum, 1, 0, 63, "tinyint(1)"), []sample{same("1", "1"), same("0", "0")}},
	{fld("c_smallint", querypb.Type_INT16, flNum, 6, 0, 63, "smallint(6)"),
		[]sample{same("32767", "32767"), same("-32768", "-32768")}},
	{fld("c_mediumint", querypb.Type_INT24, flNum, 9, 0, 63, "mediumint(9)"),
		[]sample{same("8388607", "8388607"), same("-8388608", "-8388608")}},
	{fld("c_mediumint_u", querypb.Type_UINT24, flUnsigned|flNum, 8, 0, 63, "mediumint(8) unsigned"),
		[]sample{same("16777215", "16777215")}},
	{fld("c_int", querypb.Type_INT32, flNum, 11, 0, 63, "int(11)"),
		[]sample{same("2147483647", "2147483647"), same("-2147483648", "-2147483648")}},
	{fld("c_int_u", querypb.Type_UINT32, flUnsigned|flNum, 10, 0, 63, "int(10) unsigned"),
		[]sample{same("4294967295", "4294967295")}},
	{fld("c_bigint", querypb.Type_INT64, flNum, 20, 0, 63, "bigint(20)"),
		[]sample{same("9223372036854775807", "9223372036854775807"), same("-9223372036854775808", "-9223372036854775808")}},
	{fld("c_bigint_u", querypb.Type_UINT64, flUnsigned|flNum, 20, 0, 63, "bigint(20) unsigned"),
		[]sample{same("18446744073709551615", "18446744073709551615"), same("9223372036854775808", "9223372036854775808")}},
	{fld("c_decimal", querypb.Type_DECIMAL, flNum, 32, 10, 63, "decimal(30,10)"), []sample{
		same("99999999999999999999.9999999999", `"99999999999999999999.9999999999"`),
		same("-1.5000000000", `"-1.5000000000"`),
		same("0.0000000001", `"0.0000000001"`)}},
	{fld("c_decimal_u", querypb.Type_DECIMAL, flUnsigned|flNum, 6, 2, 63, "decimal(5,2) unsigned"),
		[]sample{same("999.99", `"999.99"`)}},
	{fld("c_float", querypb.Type_FLOAT32, flNum, 12, 31, 63, "float"), []sample{
		phases("3.40282E+38", "3.40282e38", "3.40282e+38"),
		phases("-1.17549E-38", "-1.17549e-38", "-1.17549e-38"),
		phases("1.1E+00", "1.1", "1.1"),
		phases("3E-01", "0.3", "0.3"),
		phases("1.6777216E+07", "16777200", "16777200")}},
	{fld("c_float_p", querypb.Type_FLOAT32, flNum, 7, 3, 63, "float(7,3)"),
		[]sample{phases("1.234568E+03", "1234.568", "1234.568")}},
	{fld("c_double", querypb.Type_FLOAT64, flNum, 22, 31, 63, "double"), []sample{
		phases("1.7976931348623157E+308", "1.7976931348623157e308", "1.7976931348623157e+308"),
		phases("2.2250738585072014E-308", "2.2250738585072014e-308", "2.2250738585072014e-308"),
		phases("1E-01", "0.1", "0.1"),
		phases("1E-07", "0.0000001", "1e-7"),
		phases("1.2345678901234568E+17", "1.2345678901234568e17", "123456789012345680")}},
	{fld("c_dbl_p", querypb.Type_FLOAT64, flNum, 10, 4, 63, "double(10,4)"),
		[]sample{phases("3.1416E+00", "3.1416", "3.1416")}},
	{fld("c_bit1", querypb.Type_BIT, flUnsigned, 1, 0, 63, "bit(1)"),
		[]sample{same("\x01", "1"), same("\x00", "0")}},
	{fld("c_bit12", querypb.Type_BIT, flUnsigned, 12, 0, 63, "bit(12)"),
		[]sample{same(unhexStr("0aaa"), "2730"), same(unhexStr("0001"), "1")}},
	{fld("c_bit64", querypb.Type_BIT, flUnsigned, 64, 0, 63, "bit(64)"), []sample{
		same(unhexStr("ffffffffffffffff"), "18446744073709551615"),
		same(unhexStr("0000000000000041"), "65")}},
	{fld("c_date", querypb.Type_DATE, flBinary, 10, 0, 63, "date"), []sample{
		same("9999-12-31", `"9999-12-31"`), same("2024-02-29", `"2024-02-29"`), same("0000-00-00", "null")}},
	{fld("c_time", querypb.Type_TIME, flBinary, 10, 0, 63, "time"), []sample{
		same("838:59:59", `"838:59:59"`), same("-838:59:59", `"-838:59:59"`), same("-01:02:03", `"-01:02:03"`)}},
	{fld("c_time6", querypb.Type_TIME, flBinary, 17, 6, 63, "time(6)"), []sample{
		same("838:59:59.999999", `"838:59:59.999999"`), same("-838:59:59.999999", `"-838:59:59.999999"`),
		same("-00:00:01.500000", `"-00:00:01.500000"`), same("00:00:00.000001", `"00:00:00.000001"`)}},
	{fld("c_datetime", querypb.Type_DATETIME, flBinary, 19, 0, 63, "datetime"), []sample{
		same("9999-12-31 23:59:59", `"9999-12-31T23:59:59"`),
		same("2024-06-01 12:34:56", `"2024-06-01T12:34:56"`),
		same("0000-00-00 00:00:00", "null")}},
	{fld("c_datetime6", querypb.Type_DATETIME, flBinary, 26, 6, 63, "datetime(6)"), []sample{
		same("2024-06-01 12:34:56.000120", `"2024-06-01T12:34:56.000120"`),
		same("2024-01-01 00:00:00.000000", `"2024-01-01T00:00:00.000000"`),
		same("0000-00-00 00:00:00.000000", "null")}},
	{fld("c_ts3", querypb.Type_TIMESTAMP, flUnsigned|flBinary, 23, 3, 63, "timestamp(3)"), []sample{
		same("2024-06-01 07:34:56.789", `"2024-06-01T07:34:56.789Z"`),
		same("2038-01-19 03:14:07.999", `"2038-01-19T03:14:07.999Z"`),
		same("1970-01-01 00:00:01.000", `"1970-01-01T00:00:01.000Z"`),
		same("0000-00-00 00:00:00.000", "null")}},
	{fld("c_ts", querypb.Type_TIMESTAMP, flUnsigned|flBinary, 19, 0, 63, "timestamp"), []sample{
		same("2024-06-01 07:34:56", `"2024-06-01T07:34:56Z"`), same("0000-00-00 00:00:00", "null")}},
	{fld("c_year", querypb.Type_YEAR, flUnsigned|flZerofill|flNum, 4, 0, 63, "year(4)"),
		[]sample{same("2155", "2155"), same("1970", "1970"), same("0000", "0")}},
	{fld("c_char", querypb.Type_CHAR, 0, 20, 0, 45, "char(5)"), []sample{
		same("abcde", `"abcde"`), same("ab", `"ab"`), same("a b", `"a b"`), same("", `""`)}},
	{fld("c_varchar", querypb.Type_VARCHAR, 0, 200, 0, 224, "varchar(50)"), []sample{
		same("héllo 😀 wörld 🚀", `"héllo 😀 wörld 🚀"`), same("trailing  ", `"trailing  "`)}},
	{fld("c_latin1", querypb.Type_VARCHAR, 0, 40, 0, 8, "varchar(10)"),
		[]sample{same("caf\xe9", `"café"`)}},
	{fld("c_text", querypb.Type_TEXT, flBlob, 262140, 0, 45, "text"), []sample{
		same("line1\nline2 \"q\" 's' \\ tab\t", `"line1\nline2 \"q\" 's' \\ tab\t"`), same("😀", `"😀"`)}},
	{fld("c_mediumtext", querypb.Type_TEXT, flBlob, 67108860, 0, 45, "mediumtext"),
		[]sample{same("😀", `"😀"`)}},
	{fld("c_varchar_bin", querypb.Type_VARBINARY, flBinary, 40, 0, 46, "varchar(10)"),
		[]sample{same("Ab ", `"Ab "`)}},
	{fld("c_char_bin", querypb.Type_BINARY, flBinary, 20, 0, 46, "char(5)"), []sample{same("ab", `"ab"`)}},
	{fld("c_text_bin", querypb.Type_BLOB, flBlob|flBinary, 262140, 0, 46, "text"), []sample{same("é", `"é"`)}},
	{fld("c_binary", querypb.Type_BINARY, flBinary, 4, 0, 63, "binary(4)"), []sample{
		same(unhexStr("00ff1000"), `"AP8QAA=="`), same(unhexStr("00000000"), `"AAAAAA=="`),
		same(unhexStr("41000000"), `"QQAAAA=="`)}},
	{fld("c_varbinary", querypb.Type_VARBINARY, flBinary, 10, 0, 63, "varbinary(10)"),
		[]sample{same(unhexStr("00ff10"), `"AP8Q"`), same("", `""`)}},
	{fld("c_blob", querypb.Type_BLOB, flBlob|flBinary, 65535, 0, 63, "blob"),
		[]sample{same(unhexStr("00ff10"), `"AP8Q"`)}},
	{fld("c_tinyblob", querypb.Type_BLOB, flBlob|flBinary, 255, 0, 63, "tinyblob"),
		[]sample{same("\x00", `"AA=="`)}},
	{fld("c_longblob", querypb.Type_BLOB, flBlob|flBinary, 4294967295, 0, 63, "longblob"),
		[]sample{same(unhexStr("deadbeef00"), `"3q2+7wA="`)}},
	{fld("c_enum", querypb.Type_ENUM, flEnum, 4, 0, 45, "enum('a','b','c')"),
		[]sample{same("c", `"c"`), same("a", `"a"`), same("b", `"b"`)}},
	{fld("c_set", querypb.Type_SET, flSet, 20, 0, 45, "set('x','y','z')"), []sample{
		same("x,z", `["x","z"]`), same("x,y", `["x","y"]`), same("x,y,z", `["x","y","z"]`), same("", `[]`)}},
	{fld("c_json", querypb.Type_BLOB, flBlob|flBinary, 4294967295, 0, 46, "longtext"), []sample{
		same(`{"a":[1,2.5,"x"],"b":null}`, `{"a":[1,2.5,"x"],"b":null}`),
		same(`{"k": "ü😀", "n": 1e3, "z": 1.0}`, `{"k":"ü😀","n":1e3,"z":1.0}`),
		same(`[]`, `[]`),
		same(`"just a string"`, `"just a string"`),
		same(`1`, `1`),
		same(`{"a": [1, 2.5, "x"], "b": 1}`, `{"a":[1,2.5,"x"],"b":1}`)}},
	{fld("c_uuid", querypb.Type_BINARY, flUnsigned|flBinary, 144, 0, 63, "uuid"), []sample{
		phases(unhexStr("123e4567e89b12d3a4564266141740"), "123e4567-e89b-12d3-a456-426614174000",
			`"123e4567-e89b-12d3-a456-426614174000"`),
		phases(unhexStr("6f9619ff8b86d011b42d00c04fc964ff"), "6f9619ff-8b86-d011-b42d-00c04fc964ff",
			`"6f9619ff-8b86-d011-b42d-00c04fc964ff"`),
		phases(unhexStr("000000000000000000000000000001"), "00000000-0000-0000-0000-000000000100",
			`"00000000-0000-0000-0000-000000000100"`),
		phases("", "00000000-0000-0000-0000-000000000000", `"00000000-0000-0000-0000-000000000000"`)}},
	{fld("c_inet6", querypb.Type_BINARY, flUnsigned|flBinary, 156, 0, 63, "inet6"), []sample{
		phases(unhexStr("20010db8000000000000000000000001"), "2001:db8::1", `"2001:db8::1"`),
		phases(unhexStr("00000000000000000000ffffc0000201"), "::ffff:192.0.2.1", `"::ffff:192.0.2.1"`),
		phases(unhexStr("20010db8"), "2001:db8::", `"2001:db8::"`),
		phases("", "::", `"::"`)}},
	{fld("c_inet4", querypb.Type_BINARY, flUnsigned|flBinary, 60, 0, 63, "inet4"), []sample{
		phases(unhexStr("c0a80001"), "192.168.0.1", `"192.168.0.1"`),
		phases(unhexStr("0a0000ff"), "10.0.0.255", `"10.0.0.255"`),
		phases(unhexStr("c0a8"), "192.168.0.0", `"192.168.0.0"`),
		phases("", "0.0.0.0", `"0.0.0.0"`)}},
	{fld("c_point", querypb.Type_GEOMETRY, flBlob|flBinary, 4294967295, 0, 63, "point"), []sample{
		same(unhexStr("000000000101000000000000000000f03f0000000000000040"),
			`"AAAAAAEBAAAAAAAAAAAA8D8AAAAAAAAAQA=="`)}},
	{fld("c_gen_int", querypb.Type_INT32, flNum, 11, 0, 63, "int(11)"),
		[]sample{same("1073741823", "1073741823"), same("-2", "-2"), same("21", "21")}},
	{fld("c_gen_varchar", querypb.Type_VARCHAR, 0, 240, 0, 45, "varchar(60)"),
		[]sample{same("HÉLLO 😀 WÖRLD 🚀", `"HÉLLO 😀 WÖRLD 🚀"`)}},
}

// allTypesJSON is the Options of the alltypes table: c_json is JSON.
var allTypesJSON = Options{IsJSON: func(table, column string) bool {
	return table == "alltypes" && column == "c_json"
}}

func allTypesFields() []*querypb.Field {
	fs := make([]*querypb.Field, len(allTypes))
	for i, c := range allTypes {
		fs[i] = c.field
	}
	return fs
}

// value returns the phase's bytes of a sample.
func (s sample) value(copyPhase bool) []byte {
	if copyPhase && s.copyV != nil {
		return s.copyV
	}
	return s.binlog
}

// buildRow makes a querypb.Row; a nil value is NULL.
func buildRow(vals ...[]byte) *querypb.Row {
	r := &querypb.Row{Lengths: make([]int64, len(vals))}
	for i, v := range vals {
		if v == nil {
			r.Lengths[i] = -1
			continue
		}
		r.Lengths[i] = int64(len(v))
		r.Values = append(r.Values, v...)
	}
	return r
}
