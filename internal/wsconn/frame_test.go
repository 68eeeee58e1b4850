package wsconn

import "testing"

func TestFrameHeaderLengths(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "\x81\x00"},
		{125, "\x81\x7d"},
		{126, "\x81\x7e\x00\x7e"},
		{0xffff, "\x81\x7e\xff\xff"},
		{0x10000, "\x81\x7f\x00\x00\x00\x00\x00\x01\x00\x00"},
	} {
		if got := string(appendFrameHeader(nil, 0x1, tc.n)); got != tc.want {
			t.Errorf("header for %d bytes = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// A pong is taken only when the whole masked frame is there: a server's
// (unmasked) pong, another frame, or a pong cut short is left to the
// library.
func TestPongFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		size int
		ok   bool
	}{
		{"empty masked pong", []byte{0x8a, 0x80, 1, 2, 3, 4}, 6, true},
		{"pong with payload", []byte{0x8a, 0x82, 1, 2, 3, 4, 'h', 'i', 0x81}, 8, true},
		{"cut short", []byte{0x8a, 0x82, 1, 2, 3, 4, 'h'}, 0, false},
		{"unmasked", []byte{0x8a, 0x00}, 0, false},
		{"text frame", []byte{0x81, 0x81, 0, 0, 0, 0, 'a'}, 0, false},
		{"one byte", []byte{0x8a}, 0, false},
		{"longer than a control frame", append([]byte{0x8a, 0xfe}, make([]byte, 200)...), 0, false},
	} {
		if size, ok := pongFrame(tc.b); size != tc.size || ok != tc.ok {
			t.Errorf("%s: pongFrame = %d, %v; want %d, %v", tc.name, size, ok, tc.size, tc.ok)
		}
	}
}
