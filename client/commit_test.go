package client_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/client"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// A named subscriber's commits are acked coalesced: at most one ack per
// interval, the newest, over the WebSocket while it is open and as HTTP
// POSTs otherwise; Close posts the last one unless a POST stored it
// already. The gateway ends with the last cursor committed.
func TestAckCoalescing(t *testing.T) {
	g := startGateway(t)
	const interval = 100 * time.Millisecond
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			sub := "acks-" + tr.String()
			rt := &counting{}
			c := dial(t, g.url, client.WithTransport(tr), client.WithStart("now"), client.WithSubscriber(sub),
				client.WithAckInterval(interval), client.WithHTTPClient(&http.Client{Transport: rt}))
			before := len(g.log.written())
			g.log.append(200)
			want := g.log.written()[before:]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// The application takes a transaction every 5 ms (pacing):
			// each Next commits the one before.
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			start := time.Now()
			var got []int
			acked := 0 // cursors seen stored while reading
			stored := ""
			for len(got) < len(want) {
				<-tick.C
				txn, err := c.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range txn.Changes() {
					got = append(got, rowID(t, ch))
				}
				if len(got)%50 == 0 {
					if s := g.storedCursor(t, sub); s != stored {
						stored, acked = s, acked+1
					}
				}
			}
			took := time.Since(start)
			exactlyOnce(t, sub, got, want)
			if acked < 2 {
				t.Errorf("the stored cursor moved %d times while 200 transactions were committed over %v", acked, took)
			}
			posts := rt.count("/ack")
			if most := int(took/interval) + 2; posts > most {
				t.Errorf("%d acks posted in %v: more than one per %v", posts, took, interval)
			}
			last := c.Cursor()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if s := g.storedCursor(t, sub); s != last {
				t.Errorf("after Close the gateway stores %q, want the last commit %q", s, last)
			}
			if tr == client.WebSocket && rt.count("/ack") != 1 {
				t.Errorf("%d acks posted by a WebSocket client, want 1 (the last, at Close)", rt.count("/ack"))
			}
			t.Logf("%d commits over %v: %d acks posted, %d seen stored while reading", len(want), took.Round(time.Millisecond), rt.count("/ack"), acked)
		})
	}
}

// With WithManualCommit only Commit commits; committing an older
// transaction after a newer one changes nothing.
func TestManualCommit(t *testing.T) {
	g := startGateway(t)
	store := &client.MemoryStore{}
	c := dial(t, g.url, client.WithStart("now"), client.WithManualCommit(), client.WithCursorStore(store))
	g.log.append(3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var txns []*client.Txn
	for range 3 {
		txn, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		txns = append(txns, txn)
	}
	for _, txn := range txns {
		if c.Cursor() == txn.Cursor {
			t.Fatalf("committed %q without Commit", c.Cursor())
		}
	}
	if err := c.Commit(ctx, txns[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(ctx, txns[0]); err != nil {
		t.Fatal(err)
	}
	if saved, _ := store.Load(ctx); c.Cursor() != txns[1].Cursor || saved != txns[1].Cursor {
		t.Fatalf("committed %q, saved %q; want the second transaction's %q", c.Cursor(), saved, txns[1].Cursor)
	}
}

// FileStore replaces its file whole and leaves nothing beside it.
func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	f := client.NewFileStore(filepath.Join(dir, "cursor"))
	ctx := context.Background()
	if c, err := f.Load(ctx); c != "" || err != nil {
		t.Fatalf("Load of a missing file: %q, %v", c, err)
	}
	for _, c := range []string{"1first", "1second-and-longer", "1x"} {
		if err := f.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		if got, err := f.Load(ctx); got != c || err != nil {
			t.Fatalf("Load after Save(%q): %q, %v", c, got, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("files beside the cursor: %v", entries)
	}
	if err := client.NewFileStore(filepath.Join(dir, "no", "dir")).Save(ctx, "1x"); err == nil {
		t.Fatal("Save into a missing directory succeeded")
	}
}

// A new client on the same FileStore starts after the last transaction
// committed: the one the last process was given and did not commit comes
// again, nothing before it.
func TestFileStoreResume(t *testing.T) {
	g := startGateway(t)
	path := filepath.Join(t.TempDir(), "cursor")
	c := dial(t, g.url, client.WithStart("now"), client.WithCursorStore(client.NewFileStore(path)))
	before := len(g.log.written())
	g.log.append(10)
	rows := g.log.written()[before:]
	got, _ := readRows(t, c, rows[:5])
	exactlyOnce(t, "first process", got, rows[:5])
	c.Close() // the fifth was handed over, not committed
	c = dial(t, g.url, client.WithStart("now"), client.WithCursorStore(client.NewFileStore(path)))
	got, _ = readRows(t, c, rows[4:])
	exactlyOnce(t, "second process", got, rows[4:])
}

// A gateway that shuts down closes its clients (WebSocket 4001, the end of
// an SSE stream, a refused poll) and comes back: every client resumes
// from its cursor, nothing lost or repeated.
func TestGatewayRestart(t *testing.T) {
	g := startGateway(t)
	var clients []*client.Client
	for _, tr := range transports {
		clients = append(clients, dial(t, g.url, client.WithTransport(tr), client.WithStart("now"), client.WithPoll(time.Second, 100)))
	}
	before := len(g.log.written())
	g.log.append(50)
	for i, c := range clients {
		got, _ := readRows(t, c, g.log.written()[before:])
		exactlyOnce(t, transports[i].String()+" before", got, g.log.written()[before:])
	}
	g.restart(t)
	g.log.append(50)
	for i, c := range clients {
		want := g.log.written()[before+50:]
		got, _ := readRows(t, c, want)
		exactlyOnce(t, transports[i].String()+" after the restart", got, want)
	}
}

// A WebSocket client the gateway closes as a slow consumer (4008) reads on
// from its cursor.
func TestSlowConsumer(t *testing.T) {
	g := startGateway(t, "--ws-queue", "2", "--ws-slow-after", "100ms")
	rt := &counting{}
	c := dial(t, g.url, client.WithStart("now"), client.WithQueue(1), client.WithHTTPClient(&http.Client{Transport: rt}))
	before := len(g.log.written())
	slow := metric(t, g, `vsg_ws_disconnects_total{reason="slow_consumer"}`) // of every gateway of the process
	// More than the socket buffers between the gateway and the client hold
	// (megabytes on loopback), and the application takes nothing until the
	// gateway gave up on it.
	g.log.append(20000)
	wait.For(t, "a slow consumer disconnect", 10*time.Second, func() bool {
		return metric(t, g, `vsg_ws_disconnects_total{reason="slow_consumer"}`) > slow
	})
	want := g.log.written()[before:]
	got, _ := readRows(t, c, want)
	exactlyOnce(t, "after 4008", got, want)
	if n := rt.count("/ws"); n < 2 {
		t.Errorf("%d WebSocket handshakes: the client did not reconnect after 4008", n)
	}
}

// An ack the gateway refuses (a cursor it did not mint) is dropped, not
// sent again; a WebSocket it closed for it (4000) is reopened from the
// cursor. Reading goes on, nothing lost or repeated.
func TestForeignAck(t *testing.T) {
	g := startGateway(t)
	for _, tr := range transports {
		t.Run(tr.String(), func(t *testing.T) {
			rt := &counting{}
			c := dial(t, g.url, client.WithTransport(tr), client.WithStart("now"), client.WithSubscriber("foreign-"+tr.String()),
				client.WithAckInterval(0), client.WithHTTPClient(&http.Client{Transport: rt}))
			before := len(g.log.written())
			g.log.append(5)
			got, _ := readRows(t, c, g.log.written()[before:])
			opened := rt.count("/ws")
			c.Ack("1forged")
			switch tr {
			case client.WebSocket:
				wait.For(t, "the WebSocket closed for the ack to be reopened", 30*time.Second, func() bool { return rt.count("/ws") > opened })
			default:
				wait.For(t, "the ack to be posted", 30*time.Second, func() bool { return rt.count("/ack") > 0 })
			}
			g.log.append(5)
			more, _ := readRows(t, c, g.log.written()[before+5:])
			exactlyOnce(t, tr.String(), append(got, more...), g.log.written()[before:])
		})
	}
}
