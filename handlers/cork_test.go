package handlers

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// recordConn counts the writes that reach the network.
type recordConn struct {
	net.Conn
	writes [][]byte
}

func (r *recordConn) Write(p []byte) (int, error) {
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func TestCorkHoldsWritesUntilUncork(t *testing.T) {
	rec := &recordConn{}
	c := &corkConn{Conn: rec}
	c.Write([]byte("a"))
	if len(rec.writes) != 1 {
		t.Fatal("uncorked write was held back")
	}
	c.cork()
	c.Write([]byte("b"))
	c.Write([]byte("c"))
	if len(rec.writes) != 1 {
		t.Fatalf("corked writes reached the network: %q", rec.writes)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 2 || string(rec.writes[1]) != "bc" {
		t.Fatalf("uncork sent %q, want one write \"bc\"", rec.writes)
	}
	if err := c.uncork(); err != nil || len(rec.writes) != 2 {
		t.Fatal("a second uncork wrote again")
	}
}

func TestCorkFlushesWhenFull(t *testing.T) {
	rec := &recordConn{}
	c := &corkConn{Conn: rec}
	c.cork()
	chunk := bytes.Repeat([]byte{'x'}, 1000)
	total := 0
	for total < 3*corkMax {
		n, err := c.Write(chunk)
		if err != nil || n != len(chunk) {
			t.Fatal(n, err)
		}
		total += n
	}
	if len(rec.writes) < 2 {
		t.Fatalf("%d writes for %d corked bytes: the buffer is not bounded", len(rec.writes), total)
	}
	c.uncork()
	sum := 0
	for _, w := range rec.writes {
		sum += len(w)
	}
	if sum != total {
		t.Fatalf("%d bytes sent, %d written", sum, total)
	}
}

var _ io.Writer = (*corkConn)(nil)
