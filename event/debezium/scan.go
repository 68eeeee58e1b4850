package debezium

import "bytes"

// The scanner reads the gateway's own event JSON (event/), which is
// compact and valid: no whitespace between tokens, strings escaped. It
// finds where values end; it never decodes them.

// skipValue returns the index just past the JSON value starting at b[i],
// or -1 when b holds no complete value there.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipContainer(b, i)
	}
	// A number, true, false or null: up to the next delimiter.
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']':
			return j
		}
		j++
	}
	return j
}

// skipString returns the index just past the string starting at b[i]: the
// next quote not escaped (preceded by an even number of backslashes),
// found with IndexByte rather than byte by byte.
func skipString(b []byte, i int) int {
	for j := i + 1; j <= len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// skipContainer returns the index just past the object or array starting
// at b[i], counting brackets outside strings.
func skipContainer(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			if j = skipString(b, j); j < 0 {
				return -1
			}
			j--
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// appendString writes s as a JSON string.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"' || ch == '\\':
			dst = append(dst, '\\', ch)
		case ch < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&15])
		default:
			dst = append(dst, ch)
		}
	}
	return append(dst, '"')
}
