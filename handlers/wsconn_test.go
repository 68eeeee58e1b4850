package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
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

func TestWSConnBuffersFramesUntilFlush(t *testing.T) {
	rec := &recordConn{}
	c := &wsConn{Conn: rec}
	c.text([]byte("a"))
	c.text([]byte("bc"))
	if len(rec.writes) != 0 {
		t.Fatalf("frames reached the network before flush: %q", rec.writes)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if want := "\x81\x01a\x81\x02bc"; len(rec.writes) != 1 || string(rec.writes[0]) != want {
		t.Fatalf("flush sent %q, want one write %q", rec.writes, want)
	}
	if err := c.flush(); err != nil || len(rec.writes) != 1 {
		t.Fatal("a second flush wrote again")
	}
	// A library frame goes out at once, behind what is buffered.
	c.text([]byte("d"))
	c.Write([]byte("PONG"))
	if len(rec.writes) != 2 || string(rec.writes[1]) != "\x81\x01dPONG" {
		t.Fatalf("library write: %q", rec.writes)
	}
	c.Write([]byte("X"))
	if len(rec.writes) != 3 || string(rec.writes[2]) != "X" {
		t.Fatalf("library write with nothing buffered: %q", rec.writes)
	}
}

func TestWSConnNoDataAfterClose(t *testing.T) {
	rec := &recordConn{}
	c := &wsConn{Conn: rec}
	if err := c.text([]byte("a")); err != nil {
		t.Fatal(err)
	}
	// A close frame (opcode 8) written by the library: status 1000.
	if _, err := c.Write([]byte{0x88, 0x02, 0x03, 0xe8}); err != nil {
		t.Fatal(err)
	}
	if err := c.text([]byte("b")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("data frame after the close frame: %v, want net.ErrClosed", err)
	}
	if len(rec.writes) != 1 || string(rec.writes[0]) != "\x81\x01a\x88\x02\x03\xe8" {
		t.Fatalf("sent %q", rec.writes)
	}
}

func TestWSConnBoundsItsBuffer(t *testing.T) {
	rec := &recordConn{}
	c := &wsConn{Conn: rec}
	msg := bytes.Repeat([]byte{'x'}, 1000)
	for range 3 * wsFlushAt / 1000 {
		if err := c.text(msg); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.writes) < 2 {
		t.Fatalf("%d writes for %d buffered bytes: the buffer is not bounded", len(rec.writes), 3*wsFlushAt)
	}
	c.flush()
	sum := 0
	for _, w := range rec.writes {
		sum += len(w)
	}
	if want := 3 * wsFlushAt / 1000 * (1000 + 4); sum != want {
		t.Fatalf("%d bytes sent, want %d", sum, want)
	}
}

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

// TestWSConnFramesReadByLibrary writes messages of every header size
// through wsConn while the client pings the server the whole time, so the
// library writes pongs concurrently with the data frames. A frame torn by
// an interleaved write would fail the client's read or its comparison.
func TestWSConnFramesReadByLibrary(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 127, 300, 1000, 300, 0xffff, 300, 0x10000, 300, 200 << 10, 300}
	const rounds = 3000
	payload := func(i int) []byte {
		n := sizes[i%len(sizes)]
		b := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		if n >= 8 {
			copy(b, fmt.Sprintf("%08d", i))
		}
		return b
	}
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			// Not this test's client: a stray request from another
			// process to a port it used before. Only the upgrade counts.
			http.Error(w, "not a WebSocket handshake", http.StatusBadRequest)
			return
		}
		hj := &wsHijacker{ResponseWriter: w}
		c, err := websocket.Accept(hj, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			done <- err
			return
		}
		defer c.CloseNow()
		// The library answers pings while reading, until the client closes.
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			for {
				if _, _, err := c.Read(context.Background()); err != nil {
					return
				}
			}
		}()
		for i := range rounds {
			if err := hj.conn.text(payload(i)); err != nil {
				done <- err
				return
			}
			if i%7 == 0 {
				if err := hj.conn.flush(); err != nil {
					done <- err
					return
				}
			}
		}
		if err := hj.conn.flush(); err != nil {
			done <- err
			return
		}
		<-closed
		done <- nil
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	msgs := make(chan []byte, rounds)
	readErr := make(chan error, 1)
	go func() {
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				readErr <- err
				close(msgs)
				return
			}
			if typ != websocket.MessageText {
				readErr <- fmt.Errorf("message type %v", typ)
				close(msgs)
				return
			}
			msgs <- b
		}
	}()
	// Ping all along (pongs need the reader above to take them).
	var pings atomic.Int64
	pingCtx, stopPings := context.WithCancel(ctx)
	pinged := make(chan error, 1)
	go func() {
		for pingCtx.Err() == nil {
			if err := c.Ping(pingCtx); err != nil && pingCtx.Err() == nil {
				pinged <- err
				return
			}
			pings.Add(1)
		}
		pinged <- nil
	}()
	for i := range rounds {
		b, ok := <-msgs
		if !ok {
			t.Fatalf("after %d messages: %v", i, <-readErr)
		}
		if want := payload(i); !bytes.Equal(b, want) {
			t.Fatalf("message %d: %d bytes %.20q…, want %d bytes %.20q…", i, len(b), b, len(want), want)
		}
	}
	during := pings.Load()
	stopPings()
	if err := <-pinged; err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := c.Close(websocket.StatusNormalClosure, "done"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if during == 0 {
		t.Fatalf("no ping answered during the writes (%d): the test did not interleave", during)
	}
	t.Logf("%d messages, %d pings answered in between", rounds, during)
}
