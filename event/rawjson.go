package event

import "unicode/utf8"

// Embedding stored JSON documents.
//
// A JSON column's text is embedded as JSON, not as a string, but not
// byte-for-byte: events are single-line (NDJSON, SSE data lines), so the
// whitespace between tokens is removed, and strings get the same U+2028,
// U+2029 and invalid-UTF-8 treatment as every other string. Numbers,
// escapes and member order are kept exactly as stored (MariaDB keeps `1e3`
// and `1.0` verbatim, and so does the gateway).

// maxJSONDepth bounds nesting so that a hostile document cannot exhaust the
// stack; deeper documents are emitted as strings instead. MariaDB's own
// JSON functions stop at 32 levels.
const maxJSONDepth = 512

// appendRawJSON appends the compacted form of doc and reports whether doc
// was valid JSON. On false, dst is returned unchanged.
func appendRawJSON(dst, doc []byte) ([]byte, bool) {
	p := jsonCompactor{src: doc, dst: dst}
	if !p.value(0) {
		return dst, false
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return dst, false
	}
	return p.dst, true
}

type jsonCompactor struct {
	src []byte
	pos int
	dst []byte
}

func (p *jsonCompactor) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonCompactor) value(depth int) bool {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return false
	}
	switch c := p.src[p.pos]; c {
	case '{':
		return p.container(depth, '}', true)
	case '[':
		return p.container(depth, ']', false)
	case '"':
		return p.str()
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		return p.number()
	}
}

// container reads an object (members) or an array after its opening byte.
func (p *jsonCompactor) container(depth int, closing byte, members bool) bool {
	if depth >= maxJSONDepth {
		return false
	}
	p.dst = append(p.dst, p.src[p.pos])
	p.pos++
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == closing {
		p.dst = append(p.dst, closing)
		p.pos++
		return true
	}
	for {
		if members {
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != '"' || !p.str() {
				return false
			}
			p.skipSpace()
			if p.pos >= len(p.src) || p.src[p.pos] != ':' {
				return false
			}
			p.dst = append(p.dst, ':')
			p.pos++
		}
		if !p.value(depth + 1) {
			return false
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			return false
		}
		switch p.src[p.pos] {
		case ',':
			p.dst = append(p.dst, ',')
			p.pos++
		case closing:
			p.dst = append(p.dst, closing)
			p.pos++
			return true
		default:
			return false
		}
	}
}

func (p *jsonCompactor) literal(word string) bool {
	if len(p.src)-p.pos < len(word) || string(p.src[p.pos:p.pos+len(word)]) != word {
		return false
	}
	p.dst = append(p.dst, word...)
	p.pos += len(word)
	return true
}

// str copies a string, validating escapes; existing escapes are kept as
// written.
func (p *jsonCompactor) str() bool {
	s := p.src
	i := p.pos + 1
	p.dst = append(p.dst, '"')
	start := i
	for i < len(s) {
		b := s[i]
		switch {
		case b == '"':
			p.dst = append(p.dst, s[start:i]...)
			p.dst = append(p.dst, '"')
			p.pos = i + 1
			return true
		case b < 0x20:
			return false
		case b == '\\':
			if i+1 >= len(s) {
				return false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) || !isHex4(s[i+2:i+6]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
				p.dst = append(p.dst, s[start:i]...)
				p.dst = appendRune(p.dst, r)
				start = i + size
			}
			i += size
		}
	}
	return false
}

func isHex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// number copies a number, validating it against the JSON grammar.
func (p *jsonCompactor) number() bool {
	s := p.src
	i := p.pos
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return false
		}
		i = j
	}
	p.dst = append(p.dst, s[p.pos:i]...)
	p.pos = i
	return true
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}
