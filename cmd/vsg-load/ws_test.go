package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSConn runs the raw client against coder/websocket (the gateway's
// library), read by the epoll loop and by blocking reads: messages of
// every length encoding, one fragmented over many frames and reads, a ping
// it must answer (Ping returns only when the pong arrives), a masked
// message to the server, and the close code.
func TestWSConn(t *testing.T) {
	for _, driver := range []struct {
		name string
		each func(*wsConn, handler) error
	}{{"epoll", (*wsConn).each}, {"blocking", (*wsConn).eachBlocking}} {
		t.Run(driver.name, func(t *testing.T) { testWSConn(t, driver.each) })
	}
}

func testWSConn(t *testing.T, each func(*wsConn, handler) error) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		// Reading is needed for the pong to be processed.
		go func() {
			_, b, err := c.Read(ctx)
			if err == nil {
				got <- string(b)
			}
		}()
		for _, n := range []int{5, 200, 70000} {
			if err := c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("x", n))); err != nil {
				return
			}
		}
		// One message in frames of the library's buffer size.
		mw, err := c.Writer(ctx, websocket.MessageText)
		if err != nil {
			return
		}
		for range 10 {
			mw.Write([]byte(strings.Repeat("y", 3000)))
		}
		mw.Close()
		if err := c.Ping(ctx); err != nil {
			t.Errorf("ping: %v", err)
		}
		c.Write(ctx, websocket.MessageText, []byte("after ping"))
		<-got
		c.Close(4008, "slow")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	if _, err := dialWS(ctx, addr, "/", nil); err == nil {
		t.Fatal("upgrade without a token succeeded")
	} else if he := (*httpError)(nil); !errors.As(err, &he) || he.status != 401 {
		t.Fatalf("err %v", err)
	}

	c, err := dialWS(ctx, addr, "/", http.Header{"Authorization": {"Bearer tok"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var lens []int
	err = each(c, func(m []byte, now int64) error {
		if now == 0 {
			t.Error("no receive time")
		}
		lens = append(lens, len(m))
		switch {
		case len(m) == 30000 && strings.Trim(string(m), "y") != "":
			t.Error("the fragmented message is not its frames in order")
		case string(m) == "after ping":
			if err := c.writeText([]byte(`{"ack":"c"}`)); err != nil {
				return err
			}
		}
		return nil
	})
	var ce *errClosed
	if !errors.As(err, &ce) || ce.code != 4008 || ce.reason != "slow" {
		t.Fatalf("close: %v", err)
	}
	if want := []int{5, 200, 70000, 30000, 10}; !slices.Equal(lens, want) {
		t.Fatalf("messages of %v bytes, want %v", lens, want)
	}
}

// TestWSConnClosedWhileReading: closing a connection that each reads (a
// reconnect storm's kick) ends each with net.ErrClosed, and a handler's
// error ends it with that error.
func TestWSConnClosedWhileReading(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.Write(r.Context(), websocket.MessageText, []byte("hello"))
		c.Read(r.Context()) // until the client goes
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	c, err := dialWS(context.Background(), addr, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.each(func([]byte, int64) error {
		go c.close()
		return nil
	})
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("each after close: %v", err)
	}

	c, err = dialWS(context.Background(), addr, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	stop := errors.New("stop")
	if err := c.each(func([]byte, int64) error { return stop }); err != stop {
		t.Fatalf("each with a failing handler: %v", err)
	}
}
