package event

import "encoding/base64"

// appendBase64 writes bytes as a standard, padded base64 string.
func appendBase64(dst, v []byte) ([]byte, error) {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"'), nil
}
