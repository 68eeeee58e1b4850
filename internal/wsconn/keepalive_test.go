package wsconn

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// Ping sends an unmasked ping; a second one before the client's pong
// reports ErrNoPong, and a pong taken by the reader's wait lets the next
// ping go out.
func TestPingNeedsThePreviousPong(t *testing.T) {
	c, client := tcpConn(t)
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, len(pingFrame))
	if _, err := io.ReadFull(client, got); err != nil || !bytes.Equal(got, pingFrame[:]) {
		t.Fatalf("client read %x (%v), want the ping %x", got, err, pingFrame)
	}
	if err := c.Ping(); !errors.Is(err, ErrNoPong) {
		t.Fatalf("a ping with the last one unanswered: %v, want ErrNoPong", err)
	}
	if _, err := client.Write(append(append([]byte{}, clientPong...), clientText...)); err != nil {
		t.Fatal(err)
	}
	if stop := c.AwaitReadable(); stop {
		t.Fatal("stop without a close")
	}
	waitPonged(t, c)
	if err := c.Ping(); err != nil {
		t.Fatalf("a ping after the pong: %v", err)
	}
	if _, err := io.ReadFull(client, got); err != nil || !bytes.Equal(got, pingFrame[:]) {
		t.Fatalf("client read %x (%v), want the second ping", got, err)
	}
}

// A ping behind buffered frames goes out after them, in the same write.
func TestPingBehindBufferedFrames(t *testing.T) {
	rec := &recordConn{}
	c := New(rec)
	if err := c.Text([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 1 || string(rec.writes[0]) != "\x81\x01a\x89\x00" {
		t.Fatalf("sent %q, want the text frame then the ping in one write", rec.writes)
	}
}
