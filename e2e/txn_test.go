package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// txnEvent is what the transaction-boundary test reads of an event.
type txnEvent struct {
	Type   string `json:"type"`
	Cursor string `json:"cursor"`
	TxnEnd bool   `json:"txn_end"`
	After  struct {
		Email string `json:"email"`
	} `json:"after"`
}

// TestTransactionBoundaries writes multi-row transactions of known sizes
// and checks that every push transport shows where each one ends: on
// WebSocket the last event of a transaction, and only it, carries
// "txn_end"; with batch=txn each message is one whole transaction; on SSE
// only the last event of a transaction carries an id. Every event of a
// transaction carries the same cursor, and consecutive transactions
// different ones.
func TestTransactionBoundaries(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One shard: rows are checked in commit order, and a multi-row insert
	// is one transaction.
	freshCluster(t, ctx)
	g := startGateway(t, withDataDir(t)...)
	stream := uniqueName("txn")
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	token := initialCursor(t, ctx, g, stream)

	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sizes := []int{1, 3, 5, 2, 40, 1}
	var want [][]string // emails per transaction
	for i, n := range sizes {
		var rows []string
		var sb strings.Builder
		sb.WriteString("insert into customer(email) values ")
		for j := 0; j < n; j++ {
			email := fmt.Sprintf("%s-t%d-%02d@e2e", stream, i, j)
			rows = append(rows, email)
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('%s')", email)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			t.Fatal(err)
		}
		want = append(want, rows)
	}
	total := 0
	for _, n := range sizes {
		total += n
	}

	// check compares transactions as read (emails, cursors) with want.
	check := func(t *testing.T, got [][]txnEvent) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%d transactions, want %d", len(got), len(want))
		}
		prev := ""
		for i, txn := range got {
			var emails []string
			for _, e := range txn {
				emails = append(emails, e.After.Email)
				if e.Cursor != txn[0].Cursor {
					t.Fatalf("transaction %d: events with different cursors", i)
				}
			}
			if !slices.Equal(emails, want[i]) {
				t.Fatalf("transaction %d: %v, want %v", i, emails, want[i])
			}
			if txn[0].Cursor == "" || txn[0].Cursor == prev {
				t.Fatalf("transaction %d: cursor %q (previous %q)", i, txn[0].Cursor, prev)
			}
			prev = txn[0].Cursor
		}
	}

	wsURL := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/streams/" + stream + "/ws?cursor=" + url.QueryEscape(token)
	t.Run("ws", func(t *testing.T) {
		c, _, err := websocket.Dial(ctx, wsURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		var got [][]txnEvent
		var cur []txnEvent
		for n := 0; n < total; {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var e txnEvent
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if e.Type != "change" {
				if e.TxnEnd {
					t.Fatalf("txn_end on a %s event", e.Type)
				}
				continue
			}
			n++
			cur = append(cur, e)
			if e.TxnEnd {
				got, cur = append(got, cur), nil
			}
		}
		if len(cur) != 0 {
			t.Fatalf("%d events after the last txn_end", len(cur))
		}
		check(t, got)
	})

	t.Run("ws batch=txn", func(t *testing.T) {
		c, _, err := websocket.Dial(ctx, wsURL+"&batch=txn", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		var got [][]txnEvent
		for n := 0; n < total; {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b[0] != '[' {
				continue // a heartbeat
			}
			var txn []txnEvent
			if err := json.Unmarshal(b, &txn); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			// The cursor is written once, on the array's last event.
			last := txn[len(txn)-1].Cursor
			for i := range txn {
				e := &txn[i]
				if e.TxnEnd != (i == len(txn)-1) {
					t.Fatalf("event %d of %d: txn_end %v", i, len(txn), e.TxnEnd)
				}
				if (e.Cursor != "") != (i == len(txn)-1) {
					t.Fatalf("event %d of %d: cursor %q", i, len(txn), e.Cursor)
				}
				e.Cursor = last
			}
			n += len(txn)
			got = append(got, txn)
		}
		check(t, got)
	})

	t.Run("sse", func(t *testing.T) {
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		req, _ := http.NewRequestWithContext(sctx, "GET", g.url+"/v1/streams/"+stream+"/sse?cursor="+url.QueryEscape(token), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		var got [][]txnEvent
		var cur []txnEvent
		id, typ := "", ""
		for n := 0; n < total; {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "event: "):
				typ = line[7:]
			case strings.HasPrefix(line, "data: ") && typ == "change":
				var e txnEvent
				if err := json.Unmarshal([]byte(line[6:]), &e); err != nil {
					t.Fatal(err)
				}
				n++
				cur = append(cur, e)
				if id != "" {
					if id != e.Cursor {
						t.Fatalf("id %q is not the event's cursor %q", id, e.Cursor)
					}
					got, cur = append(got, cur), nil
				}
			case line == "":
				id, typ = "", ""
			}
		}
		if len(cur) != 0 {
			t.Fatalf("%d events after the last id", len(cur))
		}
		check(t, got)
	})
}
