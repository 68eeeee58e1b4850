package event

import "unicode/utf8"

// JSON string writing.
//
// Every string the gateway emits goes through these functions. Besides what
// JSON requires (quote, backslash, control characters), they escape U+2028
// and U+2029, which are legal in JSON but end a line in JavaScript source
// and in some SSE/line-oriented consumers, and they replace invalid UTF-8
// by U+FFFD so that every event is valid UTF-8 whatever the column held.

const hexDigits = "0123456789abcdef"

// safeASCII[b] is true for the ASCII bytes that are copied verbatim.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// appendString appends s, UTF-8 text, as a quoted JSON string.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendStringBody(dst, s)
	return append(dst, '"')
}

// appendStringBody appends the escaped contents of s without the quotes.
func appendStringBody(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if safeASCII[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscapedASCII(dst, b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// appendEscapedASCII appends the escape sequence of an ASCII byte that is
// not safeASCII.
func appendEscapedASCII(dst []byte, b byte) []byte {
	switch b {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
}

// appendRune appends one decoded character to a JSON string body.
func appendRune(dst []byte, r rune) []byte {
	switch {
	case r < utf8.RuneSelf:
		if safeASCII[r] {
			return append(dst, byte(r))
		}
		return appendEscapedASCII(dst, byte(r))
	case r == '\u2028' || r == '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
	case r == utf8.RuneError || !utf8.ValidRune(r):
		return append(dst, `\ufffd`...)
	}
	return utf8.AppendRune(dst, r)
}

// appendQuotedASCII appends s as a JSON string when s is known to need no
// escaping in the common case (numbers, dates); it stays correct for any
// input by falling back to the full escaper.
func appendQuotedASCII(dst, s []byte) []byte {
	for _, b := range s {
		if b >= utf8.RuneSelf || !safeASCII[b] {
			return appendString(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// quoteName returns the JSON string for an identifier (column, table,
// keyspace), computed once per FIELD event.
func quoteName(s string) []byte {
	return appendString(nil, []byte(s))
}
