package event

import (
	"encoding/base64"
	"net/netip"
	"strconv"
)

// appendBase64 writes bytes as a standard, padded base64 string.
func appendBase64(dst, v []byte) ([]byte, error) {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"'), nil
}

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
		ip, err := netip.ParseAddr(string(v))
		if err != nil || !ip.Is4() {
			return dst, valueError("not an IPv4 address")
		}
		a = ip.As4()
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
		ip, err := netip.ParseAddr(string(v))
		switch {
		case err == nil && ip.Is6() && ip.Zone() == "":
			a = ip.As16()
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
