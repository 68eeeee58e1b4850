package event

import "time"

// Dates and times.
//
// Both phases deliver MySQL's text form: DATE "2024-06-01", DATETIME and
// TIMESTAMP "2024-06-01 12:34:56[.ffffff]" with exactly `decimals` fraction
// digits. TIMESTAMP is always UTC (the binlog decoder formats the epoch in
// UTC and the copy phase sets time_zone '+00:00'); DATETIME is zone-less
// wall-clock time. The zero values MySQL allows without NO_ZERO_DATE
// ("0000-00-00", "0000-00-00 00:00:00.000") are not dates and become null.
// Partially zero dates ("2024-00-15", possible without NO_ZERO_IN_DATE) are
// passed through as written, since they do carry information.

// isZeroTemporal reports whether v is an all-zero DATE/DATETIME/TIMESTAMP.
func isZeroTemporal(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		switch c {
		case '0', '-', ':', ' ', '.':
		default:
			return false
		}
	}
	return true
}

// appendDate writes a DATE as "2024-06-01".
func appendDate(dst, v []byte) ([]byte, error) {
	if isZeroTemporal(v) {
		return append(dst, "null"...), nil
	}
	return appendQuotedASCII(dst, v), nil
}

// appendDatetime writes a DATETIME as "2024-06-01T12:34:56.000120": ISO
// 8601 local time, no zone, the fraction digits as delivered.
func appendDatetime(dst, v []byte) ([]byte, error) {
	return appendDateTimeT(dst, v, false), nil
}

// appendTimestamp writes a TIMESTAMP as RFC 3339 UTC:
// "2024-06-01T07:34:56.789Z".
func appendTimestamp(dst, v []byte) ([]byte, error) {
	return appendDateTimeT(dst, v, true), nil
}

func appendDateTimeT(dst, v []byte, utc bool) []byte {
	if isZeroTemporal(v) {
		return append(dst, "null"...)
	}
	if len(v) < 11 || v[10] != ' ' || !plainASCII(v) {
		// Not the expected layout: keep the value, as a string.
		return appendString(dst, v)
	}
	dst = append(dst, '"')
	dst = append(dst, v[:10]...)
	dst = append(dst, 'T')
	dst = append(dst, v[11:]...)
	if utc {
		dst = append(dst, 'Z')
	}
	return append(dst, '"')
}

// plainASCII reports whether v needs no JSON escaping.
func plainASCII(v []byte) bool {
	for _, c := range v {
		if c >= 0x80 || !safeASCII[c] {
			return false
		}
	}
	return true
}

// appendTime writes a TIME as delivered ("-838:59:59.999999"): it is a
// duration as much as a time of day, so no ISO form fits.
func appendTime(dst, v []byte) ([]byte, error) {
	return appendQuotedASCII(dst, v), nil
}

// appendCommitTS writes the event's commit time, unix seconds, as
// "2026-12-02T15:01:02Z", or null for 0 (copy-phase rows have no commit).
func appendCommitTS(dst []byte, sec int64) []byte {
	if sec == 0 {
		return append(dst, "null"...)
	}
	t := time.Unix(sec, 0).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return appendString(dst, []byte(t.Format(time.RFC3339)))
	}
	hour, minute, second := t.Clock()
	dst = append(dst, '"')
	dst = append4(dst, year)
	dst = append(dst, '-')
	dst = append2(dst, int(month))
	dst = append(dst, '-')
	dst = append2(dst, day)
	dst = append(dst, 'T')
	dst = append2(dst, hour)
	dst = append(dst, ':')
	dst = append2(dst, minute)
	dst = append(dst, ':')
	dst = append2(dst, second)
	return append(dst, 'Z', '"')
}

func append2(dst []byte, n int) []byte {
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

func append4(dst []byte, n int) []byte {
	return append(dst, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
}
