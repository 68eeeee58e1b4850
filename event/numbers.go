package event

import (
	"math"
	"strconv"
)

// Numeric values.
//
// Integers and DECIMALs are copied digit for digit, never through a float,
// so BIGINT UNSIGNED 18446744073709551615 and DECIMAL(65,30) stay exact.
// Leading zeros are removed because the copy phase sends ZEROFILL columns
// zero-padded ("0000000042") while the binlog does not, and JSON numbers
// cannot have them anyway.

// appendInt appends an integer value (all widths, signed or not, YEAR).
func appendInt(dst, v []byte) ([]byte, error) {
	digits := v
	neg := len(digits) > 0 && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return dst, valueError("not an integer")
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return dst, valueError("not an integer")
		}
	}
	digits = trimLeadingZeros(digits)
	if neg && !(len(digits) == 1 && digits[0] == '0') {
		dst = append(dst, '-')
	}
	return append(dst, digits...), nil
}

// trimLeadingZeros drops leading zeros of a digit string, keeping one digit.
func trimLeadingZeros(d []byte) []byte {
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return d
}

// appendDecimal appends a DECIMAL as a JSON string: "-12.50" stays
// "-12.50" (the scale is part of the value), only ZEROFILL padding goes.
func appendDecimal(dst, v []byte) ([]byte, error) {
	digits := v
	neg := len(digits) > 0 && digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	intPart, frac := digits, []byte(nil)
	for i, c := range digits {
		if c == '.' {
			intPart, frac = digits[:i], digits[i+1:]
			break
		}
	}
	if len(intPart) == 0 || !allDigits(intPart) || (frac != nil && (len(frac) == 0 || !allDigits(frac))) {
		return dst, valueError("not a decimal")
	}
	dst = append(dst, '"')
	if neg {
		dst = append(dst, '-')
	}
	dst = append(dst, trimLeadingZeros(intPart)...)
	if frac != nil {
		dst = append(dst, '.')
		dst = append(dst, frac...)
	}
	return append(dst, '"'), nil
}

func allDigits(s []byte) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// floatFullPrecision is Field.Decimals for FLOAT/DOUBLE declared without
// (M,D) (MySQL's NOT_FIXED_DEC).
const floatFullPrecision = 31

// FLOAT and DOUBLE.
//
// The two phases spell the same stored value differently: the binlog sends
// Go's shortest 'E' form of the exact value ("1.6777216E+07", "1E-01"),
// the copy phase sends MariaDB's text ("16777200", "0.1"), and MariaDB
// prints a FLOAT without (M,D) with only 6 significant digits. The JSON
// must not depend on the phase, so each value is normalized to what MariaDB
// itself displays:
//
//   - FLOAT (decimals 31): the value is rounded to 6 significant digits
//     (FLT_DIG, as MariaDB shows it), then written in the shortest form
//     that reads back as that rounded number: 16777216 → 16777200,
//     3.4028234e38 → 3.40282e+38, 1.1 → 1.1.
//   - DOUBLE (decimals 31): exact; the shortest form that reads back as the
//     same float64 (0.1, 1e-7, 1.7976931348623157e+308).
//   - FLOAT(M,D) / DOUBLE(M,D): exactly D decimals, as MariaDB shows them:
//     FLOAT(7,3) 1234.568 → 1234.568, DOUBLE(10,4) 3.1416 → 3.1416,
//     1.5 → 1.5000.
//
// The shortest form uses plain notation for magnitudes in [1e-6, 1e21) and
// exponent notation outside (like JavaScript and encoding/json).

// floatEncoder returns the encoder for a FLOAT32/FLOAT64 column.
func floatEncoder(bits int, decimals uint32) func(dst, v []byte) ([]byte, error) {
	switch {
	case decimals < floatFullPrecision:
		d := int(decimals)
		return func(dst, v []byte) ([]byte, error) {
			f, err := parseFloat(v, bits)
			if err != nil {
				return dst, err
			}
			return strconv.AppendFloat(dst, f, 'f', d, 64), nil
		}
	case bits == 32:
		return appendFloat32Display
	default:
		return func(dst, v []byte) ([]byte, error) {
			f, err := parseFloat(v, 64)
			if err != nil {
				return dst, err
			}
			return appendShortestFloat(dst, f), nil
		}
	}
}

// appendFloat32Display writes a FLOAT (no (M,D)) rounded to 6 significant
// digits.
func appendFloat32Display(dst, v []byte) ([]byte, error) {
	f, err := parseFloat(v, 32)
	if err != nil {
		return dst, err
	}
	var buf [32]byte
	rounded := strconv.AppendFloat(buf[:0], f, 'e', 5, 64)
	f, err = strconv.ParseFloat(string(rounded), 64)
	if err != nil {
		return dst, valueError("not a float")
	}
	return appendShortestFloat(dst, f), nil
}

// parseFloat accepts both spellings ("1.1E+00", "1.1", "3.40282e38",
// ZEROFILL "0001.5") and rejects what JSON cannot hold (NaN, ±Inf).
func parseFloat(v []byte, bits int) (float64, error) {
	f, err := strconv.ParseFloat(string(v), bits)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, valueError("not a finite float")
	}
	return f, nil
}

// appendShortestFloat writes f in the shortest form that reads back as f.
func appendShortestFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 → 1e-7, as JavaScript writes it.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendBit writes a BIT(M) value, delivered as ceil(M/8) big-endian
// bytes, as an unsigned number.
func appendBit(dst, v []byte) ([]byte, error) {
	if len(v) > 8 {
		return dst, valueError("BIT value longer than 8 bytes")
	}
	var n uint64
	for _, b := range v {
		n = n<<8 | uint64(b)
	}
	return strconv.AppendUint(dst, n, 10), nil
}
