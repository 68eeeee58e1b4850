package event

import "strconv"

// MariaDB's UUID, INET6 and INET4 arrive as Field type BINARY (column_type
// "uuid"/"inet6"/"inet4") and are delivered differently per phase:
//
//   - binlog: the raw 16/16/4 bytes, in text order, with trailing 0x00
//     bytes STRIPPED (Vitess re-pads only columns whose type starts with
//     "binary"), so the all-zero UUID, "::" and "0.0.0.0" arrive empty and
//     192.168.0.0 arrives as 2 bytes;
//   - copy phase: MariaDB's text form.
//
// Both are decoded to the 16/4 bytes and formatted by one function, so the
// phases agree byte for byte, in the form MariaDB itself displays.

// appendUUID writes a UUID as lowercase 8-4-4-4-12. Raw (≤ 16 bytes) and
// text (36 bytes) cannot be confused, so the phase does not matter.
func appendUUID(dst, v []byte, _ bool) ([]byte, error) {
	var u [16]byte
	switch {
	case len(v) <= 16:
		copy(u[:], v)
	case len(v) == 36:
		j := 0
		for i := 0; i < 36; i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if v[i] != '-' {
					return dst, valueError("not a UUID")
				}
				continue
			}
			h, ok := unhex(v[i])
			if !ok {
				return dst, valueError("not a UUID")
			}
			u[j/2] |= h << (4 * uint(1-j%2))
			j++
		}
	default:
		return dst, valueError("not a UUID")
	}
	dst = append(dst, '"')
	for i, b := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0xf])
	}
	return append(dst, '"'), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendINET4 writes an INET4 as a dotted quad. Raw (≤ 4 bytes) and text
// (≥ 7 bytes) cannot be confused.
func appendINET4(dst, v []byte, _ bool) ([]byte, error) {
	var a [4]byte
	switch {
	case len(v) <= 4:
		copy(a[:], v)
	default:
		var ok bool
		if a, ok = parseIPv4(v); !ok {
			return dst, valueError("not an IPv4 address")
		}
	}
	dst = append(dst, '"')
	dst = appendDottedQuad(dst, a[:])
	return append(dst, '"'), nil
}

func appendDottedQuad(dst, a []byte) []byte {
	for i, b := range a {
		if i > 0 {
			dst = append(dst, '.')
		}
		dst = strconv.AppendUint(dst, uint64(b), 10)
	}
	return dst
}

// appendINET6 writes an INET6 the way MariaDB displays it. Raw bytes and
// text overlap in length ("::" is 2 bytes of text, and also a possible raw
// value), so the phase decides: copy-phase values are text. A copy-phase
// value that is not an address but fits 16 bytes is read as raw, so a
// binlog row mislabelled as a snapshot row still decodes.
func appendINET6(dst, v []byte, copyPhase bool) ([]byte, error) {
	var a [16]byte
	switch {
	case copyPhase || len(v) > 16:
		parsed, ok := parseIPv6(v)
		switch {
		case ok:
			a = parsed
		case len(v) <= 16:
			copy(a[:], v)
		default:
			return dst, valueError("not an IPv6 address")
		}
	default:
		copy(a[:], v)
	}
	dst = append(dst, '"')
	dst = appendINET6Text(dst, &a)
	return append(dst, '"'), nil
}

// appendINET6Text formats an IPv6 address like MariaDB (and MySQL's
// INET6_NTOA): the longest run of zero groups, even a single group, is
// written "::" (the first one on a tie); lower-case hex without leading
// zeros; IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d, when
// exactly the first six groups are zero) addresses end in a dotted quad.
func appendINET6Text(dst []byte, a *[16]byte) []byte {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(a[2*i])<<8 | uint16(a[2*i+1])
	}
	gapPos, gapLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > gapLen {
			gapPos, gapLen = i, j-i
		}
		i = j
	}
	for i := 0; i < 8; i++ {
		switch {
		case i == gapPos:
			if i == 0 {
				dst = append(dst, ':')
			}
			dst = append(dst, ':')
			i += gapLen - 1
		case i == 6 && gapPos == 0 && (gapLen == 6 || (gapLen == 5 && w[5] == 0xffff)):
			return appendDottedQuad(dst, a[12:])
		default:
			dst = strconv.AppendUint(dst, uint64(w[i]), 16)
			if i != 7 {
				dst = append(dst, ':')
			}
		}
	}
	return dst
}

// parseIPv4 parses a dotted quad (no leading zeros, like net/netip).
func parseIPv4(s []byte) (a [4]byte, ok bool) {
	field, digits := 0, 0
	val := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 || field > 3 {
				return a, false
			}
			a[field] = byte(val)
			field++
			val, digits = 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || (digits == 1 && val == 0) {
			return a, false
		}
		val = val*10 + int(c-'0')
		digits++
		if val > 255 {
			return a, false
		}
	}
	return a, field == 4
}

// parseIPv6 parses the text form of an IPv6 address: hex groups, at most
// one "::", optionally ending in a dotted quad. Zones are not accepted:
// MariaDB never writes them.
func parseIPv6(s []byte) (a [16]byte, ok bool) {
	ellipsis := -1 // byte index in a where "::" stands
	i, n := 0, 0   // position in s, bytes written to a
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		i = 2
		if i == len(s) {
			return a, true
		}
	}
	for i < len(s) {
		// One group: up to 4 hex digits, or a trailing dotted quad.
		val, digits := 0, 0
		j := i
		for ; j < len(s) && digits < 5; j++ {
			h, isHex := unhex(s[j])
			if !isHex {
				break
			}
			val = val<<4 | int(h)
			digits++
		}
		if digits == 0 || digits > 4 {
			return a, false
		}
		if j < len(s) && s[j] == '.' {
			if ellipsis < 0 && n != 12 || n > 12 {
				return a, false
			}
			v4, ok4 := parseIPv4(s[i:])
			if !ok4 {
				return a, false
			}
			copy(a[n:], v4[:])
			n += 4
			i = len(s)
			break
		}
		if n > 14 {
			return a, false
		}
		a[n], a[n+1] = byte(val>>8), byte(val)
		n += 2
		i = j
		if i == len(s) {
			break
		}
		if s[i] != ':' || i+1 == len(s) {
			return a, false
		}
		i++
		if s[i] == ':' {
			if ellipsis >= 0 {
				return a, false
			}
			ellipsis = n
			i++
			if i == len(s) {
				break
			}
		}
	}
	if ellipsis < 0 {
		return a, n == 16
	}
	if n == 16 {
		// "::" must stand for at least one group.
		return a, false
	}
	gap := 16 - n
	copy(a[ellipsis+gap:], a[ellipsis:n])
	for k := ellipsis; k < ellipsis+gap; k++ {
		a[k] = 0
	}
	return a, true
}
