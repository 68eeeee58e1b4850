package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestShutdownResumableClose: on SIGTERM a WebSocket client gets a final
// disconnect message with the cursor of its last whole transaction and
// close code 4001; a new gateway resumes from that cursor with nothing
// lost.
func TestShutdownResumableClose(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// One shard: the test checks the global order of rows.
	freshCluster(t, ctx)
	data := withDataDir(t)
	g := startGateway(t, data...)
	stream := fmt.Sprintf("shutdown-%d", time.Now().UnixNano()%1e6)
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/streams/"+stream+"/ws", &websocket.DialOptions{Subprotocols: []string{"vsg.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	w := newWriter(t, stream)
	if err := w.insert(ctx, "before", 3); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < 3 {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e, err := parseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "change" {
			seen++
		}
	}

	g.stop(syscall.SIGTERM)
	var disconnect struct {
		Type, Reason, Cursor string
		Code                 int
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != 4001 {
				t.Errorf("closed with %v, want 4001", err)
			}
			break
		}
		if strings.Contains(string(b), `"type":"disconnect"`) {
			if err := json.Unmarshal(b, &disconnect); err != nil {
				t.Fatalf("disconnect message %s: %v", b, err)
			}
		}
	}
	if disconnect.Code != 4001 || disconnect.Reason != "shutdown" || disconnect.Cursor == "" {
		t.Fatalf("disconnect message %+v", disconnect)
	}

	// Rows written while the gateway is down arrive after a resume from
	// the disconnect cursor, and the three already seen do not.
	if err := w.insert(ctx, "after", 2); err != nil {
		t.Fatal(err)
	}
	g.start()
	c2, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/streams/"+stream+"/ws?cursor="+disconnect.Cursor, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	c2.SetReadLimit(1 << 20)
	want := w.since(3)
	var got []string
	for len(got) < len(want) {
		_, b, err := c2.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e, err := parseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "change" {
			got = append(got, e.str("email"))
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after resume: %v, want %v", got, want)
	}
}
