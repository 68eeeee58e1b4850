package debezium

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

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
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

// members calls fn with each member's quoted name and raw value of the
// object at b (the whole of b, or its start when it is an unclosed event
// body). It stops early when fn returns false, and reports whether b was
// well formed as far as it read.
func members(b []byte, fn func(name, value []byte) bool) bool {
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	i := 1
	for i < len(b) && b[i] != '}' {
		if b[i] == ',' {
			i++
		}
		end := skipString(b, i)
		if end < 0 || end >= len(b) || b[end] != ':' {
			return false
		}
		name := b[i:end]
		vend := skipValue(b, end+1)
		if vend < 0 {
			return false
		}
		if !fn(name, b[end+1:vend]) {
			return true
		}
		i = vend
	}
	return true
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
