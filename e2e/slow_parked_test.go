package e2e

import (
	"context"
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
	// They are written beside the wait for the disconnect: the gateway
	// gives a slow client wsGiveUp to take its final message once it is
	// cut off, so the client must start reading then, not once the last
	// row is in (seconds later on a loaded machine).
	inserted := make(chan error, 1)
	go func() { inserted <- insertSlowRowsErr(ctx, stream) }()
	eventually(t, time.Minute, "the gateway to close the parked client that stopped reading", func() error {
		if n := wsDisconnects(t, g, "slow_consumer"); n == before {
			return fmt.Errorf("vsg_ws_disconnects_total{reason=\"slow_consumer\"} still %v", n)
		}
		return nil
	})

	got, safe, _ := readToSlowClose(t, ctx, c, stream, "mid-stream")
	if err := <-inserted; err != nil {
		t.Fatal(err)
	}
	t.Logf("parked client cut off after %d whole rows (%d read) of %d", safe, got, slowRows)
}
