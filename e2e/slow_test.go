package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSSlowConsumer: a WebSocket client that stops reading while a
// backlog streams to it is closed as a slow consumer (4008) once its queue
// has stayed full for --ws-slow-after, and the disconnect message carries
// the cursor of the last whole transaction written: resuming from it
// continues with the next row, none skipped.
func TestWSSlowConsumer(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// One shard: rows are checked in commit order, and a multi-row insert
	// is one transaction.
	freshCluster(t, ctx)
	g := startGateway(t, append(withDataDir(t), "--ws-queue-bytes", "65536", "--ws-slow-after", "300ms")...)
	stream := fmt.Sprintf("slow-%d", time.Now().UnixNano()%1e6)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	token := initialCursor(t, ctx, g, stream)

	// A backlog far larger than the socket buffers between the two ends.
	tag := stream
	insertSlowRows(t, ctx, tag)

	before := wsDisconnects(t, g, "slow_consumer")
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/streams/"+stream+"/ws?cursor="+url.QueryEscape(token), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	// Not reading: wait until the gateway has given up on this client.
	eventually(t, time.Minute, "the gateway to close the client that stopped reading", func() error {
		if n := wsDisconnects(t, g, "slow_consumer"); n == before {
			return fmt.Errorf("vsg_ws_disconnects_total{reason=\"slow_consumer\"} still %v", n)
		}
		return nil
	})

	// Now read what was sent: events, then the disconnect message.
	got, safe, cursor := readToSlowClose(t, ctx, c, tag, "mid-backlog")

	// Resume from the disconnect cursor: the next row is the one after the
	// last whole transaction, and the rest follows.
	next := safe
	for next < slowRows {
		q := url.Values{"cursor": {cursor}, "limit": {"10000"}, "wait": {"5s"}}
		req, err := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/streams/"+stream+"/changes?"+q.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("resume: %d %s", resp.StatusCode, b)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			e, err := parseEvent([]byte(line))
			if err != nil {
				t.Fatal(err)
			}
			if e.Type != "change" {
				continue
			}
			if want := fmt.Sprintf("%s-%06d@e2e", tag, next); e.str("email") != want {
				t.Fatalf("resumed row %d: %s, want %s", next, e.str("email"), want)
			}
			next++
		}
		cursor = resp.Header.Get("Vsg-Next-Cursor")
	}
	t.Logf("cut off after %d whole rows (%d read) of %d; resumed without a gap", safe, got, slowRows)
}

// slowRows rows, perTxn to a transaction: a backlog far larger than the
// socket buffers between the gateway and a client.
const slowRows, slowPerTxn = 40000, 500

// insertSlowRows inserts slowRows customers with emails tag-NNNNNN@e2e,
// numbered from 0, in transactions of slowPerTxn rows.
func insertSlowRows(t *testing.T, ctx context.Context, tag string) {
	t.Helper()
	if err := insertSlowRowsErr(ctx, tag); err != nil {
		t.Fatal(err)
	}
}

// insertSlowRowsErr is insertSlowRows for a goroutine other than the
// test's.
func insertSlowRowsErr(ctx context.Context, tag string) error {
	db, err := cluster.OpenDB("customer")
	if err != nil {
		return err
	}
	defer db.Close()
	for done := 0; done < slowRows; done += slowPerTxn {
		var sb strings.Builder
		sb.WriteString("insert into customer(email) values ")
		for i := 0; i < slowPerTxn; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('%s-%06d@e2e')", tag, done+i)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			return err
		}
	}
	return nil
}

// readToSlowClose reads what the gateway sent a client it closed as a
// slow consumer: rows tag-000000 onwards in order, then the disconnect
// message and close 4008. The client must have been cut off mid-way
// (where says where), and the disconnect message must carry the cursor of
// the last whole transaction received. It returns the rows read, the rows
// up to that transaction's end and its cursor.
func readToSlowClose(t *testing.T, ctx context.Context, c *websocket.Conn, tag, where string) (got, safe int, cursor string) {
	t.Helper()
	var disconnect struct {
		Type   string `json:"type"`
		Code   int    `json:"code"`
		Reason string `json:"reason"`
		Cursor string `json:"cursor"`
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if s := websocket.CloseStatus(err); s != 4008 {
				t.Fatalf("read ended with %v (close status %d), want close 4008", err, s)
			}
			break
		}
		var m struct {
			ev
			TxnEnd bool `json:"txn_end"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("message %.100q: %v", b, err)
		}
		switch m.Type {
		case "change":
			if want := fmt.Sprintf("%s-%06d@e2e", tag, got); m.str("email") != want {
				t.Fatalf("row %d: %s, want %s", got, m.str("email"), want)
			}
			got++
			if m.TxnEnd {
				safe, cursor = got, m.Cursor
			}
		case "disconnect":
			if err := json.Unmarshal(b, &disconnect); err != nil {
				t.Fatalf("disconnect message %s: %v", b, err)
			}
		}
	}
	if disconnect.Code != 4008 || disconnect.Reason != "slow_consumer" {
		t.Fatalf("disconnect message %+v, want code 4008 slow_consumer", disconnect)
	}
	if safe == 0 || safe >= slowRows {
		t.Fatalf("%d rows whole before the disconnect of %d: the client was not cut off %s", safe, slowRows, where)
	}
	if disconnect.Cursor != cursor {
		t.Fatalf("disconnect cursor is not the last txn_end cursor received")
	}
	return got, safe, cursor
}

// wsDisconnects reads vsg_ws_disconnects_total for reason.
func wsDisconnects(t *testing.T, g *gateway, reason string) float64 {
	t.Helper()
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := `vsg_ws_disconnects_total{reason="` + reason + `"} `
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, prefix), 64)
			return v
		}
	}
	t.Fatalf("/metrics has no %s", strings.TrimSpace(prefix))
	return 0
}
