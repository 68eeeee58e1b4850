package wsconn

import (
	"bufio"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// clientPong is a client's masked pong with an empty payload.
var clientPong = []byte{0x8a, 0x80, 1, 2, 3, 4}

// clientText is a client's masked text frame "a" (masked with 0).
var clientText = []byte{0x81, 0x81, 0, 0, 0, 0, 'a'}

// tcpConn is a Conn over a loopback TCP connection, as Hijack makes
// it, and the client's end.
func tcpConn(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	raw, err := server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return &Conn{Conn: server, br: bufio.NewReaderSize(server, libBuf), raw: raw}, client
}

// The reader's wait takes the client's pongs (in the socket, and in the
// library's buffer) and returns only for a message, which it leaves for
// the library.
func TestAwaitReadableTakesPongs(t *testing.T) {
	c, client := tcpConn(t)
	returned := make(chan bool)
	go func() { returned <- c.AwaitReadable() }()
	if _, err := client.Write(clientPong); err != nil {
		t.Fatal(err)
	}
	waitPonged(t, c)
	select {
	case <-returned:
		t.Fatal("the wait returned for a pong")
	default:
	}
	if _, err := client.Write(append(append([]byte{}, clientPong...), clientText...)); err != nil {
		t.Fatal(err)
	}
	select {
	case stop := <-returned:
		if stop {
			t.Fatal("the wait reported stop without a close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not return within 30 s of a message")
	}
	b := make([]byte, len(clientText))
	if _, err := c.br.Read(b); err != nil || string(b) != string(clientText) {
		t.Fatalf("the library reads %q (%v), want the text frame", b, err)
	}

	// A pong left in the library's buffer behind a message is taken too.
	c.ponged.Store(false)
	if _, err := client.Write(append(append(append([]byte{}, clientText...), clientPong...), clientText...)); err != nil {
		t.Fatal(err)
	}
	if stop := c.AwaitReadable(); stop {
		t.Fatal("stop without a close")
	}
	if _, err := c.br.Read(b[:len(clientText)]); err != nil {
		t.Fatal(err)
	}
	for c.br.Buffered() < len(clientPong)+len(clientText) {
		c.br.Peek(c.br.Buffered() + 1)
	}
	if stop := c.AwaitReadable(); stop || !c.ponged.Load() {
		t.Fatalf("stop %v, ponged %v: want the buffered pong taken", stop, c.ponged.Load())
	}
	if got, _ := c.br.Peek(len(clientText)); string(got) != string(clientText) {
		t.Fatalf("the library's buffer starts with %q, want the text frame", got)
	}
}

// StopWaiting takes a waiting reader out of its wait for good, and leaves
// the connection readable for the library's close handshake.
func TestStopWaiting(t *testing.T) {
	c, client := tcpConn(t)
	returned := make(chan bool)
	go func() { returned <- c.AwaitReadable() }()
	wait.For(t, "the reader to wait", 30*time.Second, c.waiting.Load)
	c.StopWaiting()
	select {
	case stop := <-returned:
		if !stop {
			t.Fatal("the wait ended without stop")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("StopWaiting did not end the wait")
	}
	if !c.AwaitReadable() {
		t.Fatal("a wait after StopWaiting did not report stop")
	}
	if _, err := client.Write(clientText); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, len(clientText))
	if _, err := c.br.Read(b); err != nil {
		t.Fatalf("the connection is not readable after StopWaiting: %v", err)
	}
}

func waitPonged(t *testing.T, c *Conn) {
	t.Helper()
	wait.For(t, "the pong to be taken", 30*time.Second, c.ponged.Load)
}
