//go:build unix

package wsconn

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
)

// A burst buffered in hold mode goes out without waiting as far as the
// socket takes it; the rest stays buffered, in order, and the blocking
// flush sends it: the client reads every byte once, in order.
func TestTryFlushKeepsWhatTheSocketRefuses(t *testing.T) {
	c, client := tcpConn(t)
	shrinkSendBuffer(t, c)

	var want bytes.Buffer
	payload := bytes.Repeat([]byte("x"), 1000)
	refused := false
	for i := 0; i < 2000 && !refused; i++ {
		c.SetHold(true)
		for j := range 16 {
			payload[0] = byte('a' + (i+j)%26)
			if err := c.Text(payload); err != nil {
				t.Fatal(err)
			}
			want.Write(appendFrameHeader(nil, 0x1, len(payload)))
			want.Write(payload)
		}
		c.SetHold(false)
		done, err := c.TryFlush()
		if err != nil {
			t.Fatal(err)
		}
		refused = !done
	}
	if !refused {
		t.Fatal("the socket took every burst: nothing was left to the writer")
	}
	if c.Buffered() == 0 {
		t.Fatal("TryFlush reported bytes left but holds none")
	}

	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if c.Buffered() != 0 {
		t.Fatalf("%d bytes still buffered after flush", c.Buffered())
	}
	c.Conn.Close()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("client read %d bytes, want %d (in order)", len(b), want.Len())
	}
}

// A write the socket refuses for good is an error, not bytes kept.
func TestTryFlushReportsAFailedSocket(t *testing.T) {
	c, client := tcpConn(t)
	client.(*net.TCPConn).SetLinger(0)
	client.Close() // RST: the server's next writes fail
	c.SetHold(true)
	c.Text([]byte("hello"))
	c.SetHold(false)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		c.Text([]byte("hello"))
		_, err = c.TryFlush()
	}
	if err == nil {
		t.Fatal("TryFlush on a reset connection never failed")
	}
}

func shrinkSendBuffer(t *testing.T, c *Conn) {
	t.Helper()
	var serr error
	if err := c.raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
}
