package debezium

import (
	"encoding/base64"
	"strconv"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// appendValue re-encodes one value of column c, written by the default
// format as v, the way Debezium's Vitess connector writes it with the JSON
// converter, decimal.handling.mode=string and
// time.precision.mode=adaptive_time_microseconds (event/TYPES.md, "The
// Debezium format"). A value it cannot read as its kind (a date with zero
// parts, which the default format passes through) becomes null, as the
// connector makes it.
func appendValue(dst []byte, c *event.Column, v []byte) []byte {
	if len(v) == 0 || v[0] == 'n' { // null
		return append(dst, "null"...)
	}
	if verbatim(c.Kind) {
		return append(dst, v...)
	}
	switch c.Kind {
	case event.KindUint64, event.KindYear:
		// Strings in the connector (UINT64 and YEAR map to VARCHAR).
		dst = append(dst, '"')
		dst = append(dst, v...)
		return append(dst, '"')
	case event.KindBit:
		return appendBits(dst, c.Length, v)
	case event.KindSet:
		return appendSet(dst, v)
	case event.KindJSON:
		return appendQuoted(dst, v)
	case event.KindDate:
		if d, ok := parseDate(v, 1); ok {
			return strconv.AppendInt(dst, d, 10)
		}
	case event.KindDateTime:
		if us, ok := parseDateTime(v); ok {
			if c.Decimals <= 3 {
				return strconv.AppendInt(dst, floorDiv(us, 1000), 10)
			}
			return strconv.AppendInt(dst, us, 10)
		}
	case event.KindTime:
		if us, ok := parseTime(v); ok {
			return strconv.AppendInt(dst, us, 10)
		}
	}
	return append(dst, "null"...)
}

// verbatim reports whether values of kind k are written as the default
// format has them: numbers, DECIMAL strings, text, ENUM, base64 bytes and
// TIMESTAMP (the connector's ZonedTimestamp is the same RFC 3339 UTC
// string). The other kinds are converted by appendValue, or (KindNull)
// are always null.
func verbatim(k event.Kind) bool {
	switch k {
	case event.KindUint64, event.KindYear, event.KindBit, event.KindSet, event.KindJSON,
		event.KindDate, event.KindDateTime, event.KindTime, event.KindNull:
		return false
	}
	return true
}

// appendBits writes a BIT value, a number in the default format: BIT(1) as
// a boolean, wider ones as io.debezium.data.Bits (the bits in
// little-endian bytes, as many as the width needs, base64).
func appendBits(dst []byte, width uint32, v []byte) []byte {
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return append(dst, "null"...)
	}
	if width <= 1 {
		return strconv.AppendBool(dst, n != 0)
	}
	var le [8]byte
	size := int(min((width+7)/8, 8))
	for i := range size {
		le[i] = byte(n >> (8 * i))
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, le[:size])
	return append(dst, '"')
}

// appendSet writes a SET, an array of member names in the default format,
// as the connector's comma-separated string: ["x","z"] → "x,z". Members
// never hold a comma, and their escaped bodies are copied as they are.
func appendSet(dst []byte, v []byte) []byte {
	dst = append(dst, '"')
	first := true
	for i := 1; i < len(v) && v[i] != ']'; {
		if v[i] == ',' {
			i++
			continue
		}
		end := skipString(v, i)
		if end < 0 {
			break
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, v[i+1:end-1]...)
		i = end
	}
	return append(dst, '"')
}

// appendQuoted writes the JSON text v as a JSON string (io.debezium.data.Json
// holds the document's text). v is compact JSON: it holds no control
// characters outside escapes, so only quotes and backslashes are escaped.
func appendQuoted(dst []byte, v []byte) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, v)
	return append(dst, '"')
}

// appendEscaped appends v with its quotes and backslashes escaped, in runs
// between them.
func appendEscaped(dst []byte, v []byte) []byte {
	start := 0
	for i, ch := range v {
		if ch == '"' || ch == '\\' {
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', ch)
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}

// parseDate reads "YYYY-MM-DD" from v[at:] (at skips an opening quote) as
// days since 1970-01-01 (io.debezium.time.Date).
func parseDate(v []byte, at int) (int64, bool) {
	if len(v) < at+10 || v[at+4] != '-' || v[at+7] != '-' {
		return 0, false
	}
	y, ok1 := digits(v[at : at+4])
	m, ok2 := digits(v[at+5 : at+7])
	d, ok3 := digits(v[at+8 : at+10])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > 31 {
		return 0, false
	}
	return daysFromCivil(y, m, d), true
}

// parseDateTime reads "YYYY-MM-DDThh:mm:ss[.f…]" (quoted) as microseconds
// since the epoch, the wall clock taken as UTC, as the connector does.
func parseDateTime(v []byte) (int64, bool) {
	days, ok := parseDate(v, 1)
	if !ok || len(v) < 21 || v[11] != 'T' || v[14] != ':' || v[17] != ':' {
		return 0, false
	}
	h, ok1 := digits(v[12:14])
	mi, ok2 := digits(v[15:17])
	s, ok3 := digits(v[18:20])
	frac, ok4 := fraction(v[20 : len(v)-1])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, false
	}
	return ((days*24+h)*60+mi)*60_000_000 + s*1_000_000 + frac, true
}

// parseTime reads "[-]h…:mm:ss[.f…]" (quoted; hours may exceed 24) as
// signed microseconds (io.debezium.time.MicroTime).
func parseTime(v []byte) (int64, bool) {
	b := v[1 : len(v)-1]
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	c := 0
	for c < len(b) && b[c] != ':' {
		c++
	}
	if c == 0 || len(b) < c+6 || b[c+3] != ':' {
		return 0, false
	}
	h, ok1 := digits(b[:c])
	m, ok2 := digits(b[c+1 : c+3])
	s, ok3 := digits(b[c+4 : c+6])
	frac, ok4 := fraction(b[c+6:])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, false
	}
	us := ((h*60+m)*60+s)*1_000_000 + frac
	if neg {
		us = -us
	}
	return us, true
}

// fraction reads "" or ".f…" (up to 6 digits) as microseconds.
func fraction(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	if b[0] != '.' || len(b) > 7 || len(b) < 2 {
		return 0, false
	}
	n, ok := digits(b[1:])
	for range 7 - len(b) {
		n *= 10
	}
	return n, ok
}

func digits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	return n, true
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (Howard Hinnant's algorithm): no time.Time
// per value.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
