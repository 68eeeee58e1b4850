package client_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/client"
)

// A huge transaction reaches the client in pieces (WebSocket messages
// without txn_end, SSE events without id, pull pages that end inside it
// with a cursor of version 2): the client hands it over whole, once, with
// the cursor after it.
func TestHugeTransaction(t *testing.T) {
	// The gateway cuts transactions past a quarter of its read-ahead (at
	// least 64 KiB) into pieces: 2000 rows make a few.
	g := startGateway(t, "--read-ahead", "262144")
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			rt := &counting{}
			c := dial(t, g.url, client.WithTransport(tr), client.WithStart("now"), client.WithPoll(time.Second, 200),
				client.WithHTTPClient(&http.Client{Transport: rt}))
			polls := rt.count("/changes")
			before := len(g.log.written())
			g.log.append(1)
			g.log.appendTxn(2000)
			g.log.append(1)
			want := g.log.written()[before:]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var sizes []int
			var got []int
			for len(got) < len(want) {
				txn, err := c.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(txn.Cursor, "2") || txn.Cursor == "" {
					t.Fatalf("a transaction handed over with cursor %q", txn.Cursor)
				}
				for _, ch := range txn.Changes() {
					got = append(got, rowID(t, ch))
				}
				sizes = append(sizes, len(txn.Changes()))
			}
			exactlyOnce(t, tr.String(), got, want)
			if len(sizes) != 3 || sizes[1] != 2000 {
				t.Fatalf("transactions of %v rows, want [1 2000 1]", sizes)
			}
			// Pages of 200 events end inside the transaction.
			if n := rt.count("/changes") - polls; tr == client.Poll && n < 10 {
				t.Fatalf("2002 rows in %d pages of at most 200", n)
			}
		})
	}
}

// Connections cut while huge transactions arrive in pieces: the client
// drops the pieces of the transaction it had in part and reads it again
// whole from the cursor before it.
func TestHugeTransactionCut(t *testing.T) {
	g := startGateway(t, "--read-ahead", "262144")
	p := newProxy(t, g.addr)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			c := dial(t, p.url(), client.WithTransport(tr), client.WithStart("now"), client.WithPoll(time.Second, 200), client.WithQueue(1))
			before := len(g.log.written())
			for range 4 {
				g.log.appendTxn(2000)
			}
			want := g.log.written()[before:]
			// Five cuts, 100 ms apart (pacing), while the client reads.
			done := make(chan struct{})
			cuts := make(chan int, 1)
			go func() {
				n := 0
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for range 5 {
					select {
					case <-done:
					case <-tick.C:
						n += p.cut()
						continue
					}
					break
				}
				cuts <- n
			}()
			got, _ := readRows(t, c, want)
			close(done)
			exactlyOnce(t, tr.String(), got, want)
			t.Logf("%d connections cut while 4 transactions of 2000 rows were read", <-cuts)
			p.cut() // the next subtest starts on a connection of its own
		})
	}
}
