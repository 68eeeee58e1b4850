package wsconn

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
)

// recordConn counts the writes that reach the network.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func TestConnBuffersFramesUntilFlush(t *testing.T) {
	rec := &recordConn{}
	c := &Conn{Conn: rec}
	c.Text([]byte("a"))
	c.Text([]byte("bc"))
	if len(rec.writes) != 0 {
		t.Fatalf("frames reached the network before flush: %q", rec.writes)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := "\x81\x01a\x81\x02bc"; len(rec.writes) != 1 || string(rec.writes[0]) != want {
		t.Fatalf("flush sent %q, want one write %q", rec.writes, want)
	}
	if err := c.Flush(); err != nil || len(rec.writes) != 1 {
		t.Fatal("a second flush wrote again")
	}
	// A library frame goes out at once, behind what is buffered.
	c.Text([]byte("d"))
	c.Write([]byte("PONG"))
	if len(rec.writes) != 2 || string(rec.writes[1]) != "\x81\x01dPONG" {
		t.Fatalf("library write: %q", rec.writes)
	}
	c.Write([]byte("X"))
	if len(rec.writes) != 3 || string(rec.writes[2]) != "X" {
		t.Fatalf("library write with nothing buffered: %q", rec.writes)
	}
}

func TestConnNoDataAfterClose(t *testing.T) {
	rec := &recordConn{}
	c := &Conn{Conn: rec}
	if err := c.Text([]byte("a")); err != nil {
		t.Fatal(err)
	}
	// A close frame (opcode 8) written by the library: status 1000.
	if _, err := c.Write([]byte{0x88, 0x02, 0x03, 0xe8}); err != nil {
		t.Fatal(err)
	}
	if err := c.Text([]byte("b")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("data frame after the close frame: %v, want net.ErrClosed", err)
	}
	if len(rec.writes) != 1 || string(rec.writes[0]) != "\x81\x01a\x88\x02\x03\xe8" {
		t.Fatalf("sent %q", rec.writes)
	}
}

func TestConnBoundsItsBuffer(t *testing.T) {
	rec := &recordConn{}
	c := &Conn{Conn: rec}
	msg := bytes.Repeat([]byte{'x'}, 1000)
	for range 3 * FlushAt / 1000 {
		if err := c.Text(msg); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.writes) < 2 {
		t.Fatalf("%d writes for %d buffered bytes: the buffer is not bounded", len(rec.writes), 3*FlushAt)
	}
	c.Flush()
	sum := 0
	for _, w := range rec.writes {
		sum += len(w)
	}
	if want := 3 * FlushAt / 1000 * (1000 + 4); sum != want {
		t.Fatalf("%d bytes sent, want %d", sum, want)
	}
}
