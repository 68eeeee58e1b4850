package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWSSlowConsumerParked: a WebSocket client idle at the live end (its
// subscription parked on the stream's tail, no producer goroutine) that
// stops reading while rows arrive is still closed as a slow consumer
// (4008) once a write has been blocked for --ws-slow-after, with the
// cursor of the last whole transaction written in the disconnect message.
// Without the write watchdog nothing fills its queue, and the session
// would wait on the socket for good.
func TestWSSlowConsumerParked(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	g := startGateway(t, append(withDataDir(t), "--ws-slow-after", "300ms")...)
	stream := fmt.Sprintf("slowpark-%d", time.Now().UnixNano()%1e6)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	before := wsDisconnects(t, g, "slow_consumer")
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/streams/"+stream+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	// A heartbeat: the session is live and idle at the head (parked).
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"type":"heartbeat"`) {
			break
		}
	}

	// Rows far beyond the socket buffers, while the client reads nothing.
	const rows, perTxn = 40000, 500
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for done := 0; done < rows; done += perTxn {
		var sb strings.Builder
		sb.WriteString("insert into customer(email) values ")
		for i := 0; i < perTxn; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('%s-%06d@e2e')", stream, done+i)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the gateway to close the parked client that stopped reading", func() error {
		if n := wsDisconnects(t, g, "slow_consumer"); n == before {
			return fmt.Errorf("vsg_ws_disconnects_total{reason=\"slow_consumer\"} still %v", n)
		}
		return nil
	})

	got, safe := 0, 0
	var safeCursor string
	var disconnect struct {
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
			if want := fmt.Sprintf("%s-%06d@e2e", stream, got); m.str("email") != want {
				t.Fatalf("row %d: %s, want %s", got, m.str("email"), want)
			}
			got++
			if m.TxnEnd {
				safe, safeCursor = got, m.Cursor
			}
		case "disconnect":
			json.Unmarshal(b, &disconnect)
		}
	}
	if disconnect.Code != 4008 || disconnect.Reason != "slow_consumer" {
		t.Fatalf("disconnect message %+v, want code 4008 slow_consumer", disconnect)
	}
	if safe == 0 || safe >= rows {
		t.Fatalf("%d rows whole before the disconnect of %d: the client was not cut off mid-stream", safe, rows)
	}
	if disconnect.Cursor != safeCursor {
		t.Fatalf("disconnect cursor is not the last txn_end cursor received")
	}
	t.Logf("parked client cut off after %d whole rows (%d read) of %d", safe, got, rows)
}
