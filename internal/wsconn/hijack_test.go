package wsconn

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestConnFramesReadByLibrary writes messages of every header size
// through a Conn from Accept while the client pings the server the whole
// time, so the library writes pongs concurrently with the data frames. A
// frame torn by an interleaved write would fail the client's read or its
// comparison.
func TestConnFramesReadByLibrary(t *testing.T) {
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
	srv := httptest.NewServer(writeFrames(rounds, payload, done))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	msgs, readErr := readMessages(ctx, c, rounds)
	stopPings := pingAlong(ctx, c)
	for i := range rounds {
		b, ok := <-msgs
		if !ok {
			t.Fatalf("after %d messages: %v", i, <-readErr)
		}
		if want := payload(i); !bytes.Equal(b, want) {
			t.Fatalf("message %d: %d bytes %.20q…, want %d bytes %.20q…", i, len(b), b, len(want), want)
		}
	}
	during, err := stopPings()
	if err != nil {
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

// writeFrames is the server: it accepts a WebSocket, writes rounds
// messages through the Conn (flushing now and then) while the library
// reads and answers the client's pings, and reports on done once the
// client has closed.
func writeFrames(rounds int, payload func(int) []byte, done chan<- error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			// Not this test's client: a stray request from another
			// process to a port it used before. Only the upgrade counts.
			http.Error(w, "not a WebSocket handshake", http.StatusBadRequest)
			return
		}
		c, conn, err := Accept(w, r, DefaultConfig(), websocket.AcceptOptions{})
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
			err = conn.Text(payload(i))
			if err == nil && i%7 == 0 {
				err = conn.Flush()
			}
			if err != nil {
				done <- err
				return
			}
		}
		if err := conn.Flush(); err != nil {
			done <- err
			return
		}
		<-closed
		done <- nil
	}
}

// readMessages reads the client's text messages into msgs, closed with the
// error that ended the reading on readErr.
func readMessages(ctx context.Context, c *websocket.Conn, n int) (msgs <-chan []byte, readErr <-chan error) {
	out := make(chan []byte, n)
	errc := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			typ, b, err := c.Read(ctx)
			if err == nil && typ != websocket.MessageText {
				err = fmt.Errorf("message type %v", typ)
			}
			if err != nil {
				errc <- err
				return
			}
			out <- b
		}
	}()
	return out, errc
}

// pingAlong pings the server without pause (the pongs need readMessages to
// take them) until stop, which reports how many pings were answered.
func pingAlong(ctx context.Context, c *websocket.Conn) (stop func() (int64, error)) {
	var pings atomic.Int64
	pingCtx, cancel := context.WithCancel(ctx)
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
	return func() (int64, error) {
		during := pings.Load()
		cancel()
		return during, <-pinged
	}
}
