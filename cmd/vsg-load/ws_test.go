package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSConn runs the raw client against coder/websocket (the gateway's
// library): messages of every length encoding, a ping it must answer
// (Ping returns only when the pong arrives), a masked message to the
// server, and the close code.
func TestWSConn(t *testing.T) {
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
	for _, n := range []int{5, 200, 70000} {
		m, err := c.next()
		if err != nil || len(m) != n {
			t.Fatalf("message of %d: %d bytes, %v", n, len(m), err)
		}
	}
	m, err := c.next()
	if err != nil || string(m) != "after ping" {
		t.Fatalf("%q %v", m, err)
	}
	if err := c.writeText([]byte(`{"ack":"c"}`)); err != nil {
		t.Fatal(err)
	}
	_, err = c.next()
	var ce *errClosed
	if !errors.As(err, &ce) || ce.code != 4008 || ce.reason != "slow" {
		t.Fatalf("close: %v", err)
	}
}
