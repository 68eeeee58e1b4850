package wsconn

import "encoding/binary"

// The opcodes the gateway writes or looks for (RFC 6455 §5.2).
const (
	opText  = 0x1
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xa
)

// appendFrameHeader appends a final (FIN) unmasked frame header (RFC 6455
// §5.2) for opcode and a payload of n bytes.
func appendFrameHeader(b []byte, opcode byte, n int) []byte {
	b = append(b, 0x80|opcode)
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
	}
}

// pingFrame is a server's ping: unmasked, no payload.
var pingFrame = [2]byte{0x80 | opPing, 0}

// maxPongFrame is the longest pong a client sends: 2 header bytes, the
// 4-byte mask and at most 125 bytes of payload (RFC 6455 §5.5).
const maxPongFrame = 2 + 4 + 125

// pongFrame reports the length of the whole masked pong frame b starts
// with, if it does.
func pongFrame(b []byte) (int, bool) {
	if len(b) < 2 || b[0] != 0x80|opPong || b[1]&0x80 == 0 {
		return 0, false
	}
	size := 6 + int(b[1]&0x7f)
	if size > maxPongFrame || len(b) < size {
		return 0, false
	}
	return size, true
}
