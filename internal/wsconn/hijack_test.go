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
// through a Conn from Accept while the client pings the server the whole time, so the
// library writes pongs concurrently with the data frames. A frame torn by
// an interleaved write would fail the client's read or its comparison.
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			if err := conn.Text(payload(i)); err != nil {
				done <- err
				return
			}
			if i%7 == 0 {
				if err := conn.Flush(); err != nil {
					done <- err
					return
				}
			}
		}
		if err := conn.Flush(); err != nil {
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
