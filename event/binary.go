package event

import (
	"encoding/base64"
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
