package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/coder/websocket"
)

// TestArrivalTime: a message that reached the socket before the tool read
// it carries the kernel's receive time, not the read's — after the server
// wrote it, before the tool looked.
func TestArrivalTime(t *testing.T) {
	send := make(chan struct{})
	sent := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx := c.CloseRead(r.Context()) // done when the client goes
		for {
			select {
			case <-send:
			case <-ctx.Done():
				return
			}
			sent <- time.Now().UnixNano()
			if c.Write(ctx, websocket.MessageText, []byte("row")) != nil {
				return
			}
		}
	}))
	defer srv.Close()

	c, err := dialWS(context.Background(), strings.TrimPrefix(srv.URL, "http://"), "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	fd, err := rawFD(c.conn)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel turns stamping on a moment after the first socket of the
	// machine asks (a deferred static key): until it has, messages come
	// unstamped. Read until one is stamped.
	deadline := time.Now().Add(10 * time.Second)
	for {
		send <- struct{}{}
		<-sent
		if err := c.each(func([]byte, int64) error { return errStop }); err != errStop {
			t.Fatalf("each: %v", err)
		}
		if c.arrived != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no message was stamped by the kernel")
		}
	}

	send <- struct{}{}
	wrote := <-sent
	// Wait until the message is in the socket's receive queue, unread.
	for queued(t, fd) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the message never reached the socket")
		}
		time.Sleep(time.Millisecond) // polling a condition: nothing signals it here
	}
	there := time.Now().UnixNano()
	err = c.each(func(m []byte, now int64) error {
		if string(m) != "row" {
			t.Errorf("message %q", m)
		}
		if c.arrived < wrote || c.arrived > there {
			t.Errorf("arrival %d not between the write %d and the moment it was seen queued %d", c.arrived, wrote, there)
		}
		if now < there {
			t.Errorf("read time %d before the message was seen queued %d", now, there)
		}
		return errStop
	})
	if err != errStop {
		t.Fatalf("each: %v", err)
	}
}

var errStop = errors.New("stop")

// queued is the number of unread bytes in the socket's receive queue.
func queued(t *testing.T, fd int) int {
	t.Helper()
	var n int32
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), siocinq, uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		t.Fatalf("SIOCINQ: %v", e)
	}
	return int(n)
}

// siocinq is Linux's SIOCINQ (FIONREAD), which package syscall lacks.
const siocinq = 0x541B
