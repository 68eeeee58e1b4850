package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/store/storetest"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// TestStoreOutage: while the store does not answer, everything that must
// read or write it is a 503 store_unavailable with Retry-After (never a
// 500, never an ack reported done), readers with a cursor keep reading,
// and WebSocket and SSE acks are kept and stored once the store is back.
func TestStoreOutage(t *testing.T) {
	loadSpec(t)
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bolt.Close() })
	st := storetest.NewOutage(bolt)
	s, _ := newTestServerOn(t, st)
	h := s.Router()
	ctx := context.Background()
	create := httptest.NewRequest(http.MethodPost, "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer"]}`))
	create.Header.Set("Content-Type", "application/json")
	if resp, body := doRequest(t, h, create); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create stream: %d %s", resp.StatusCode, body)
	}
	def := &streams.Definition{Name: "customers", Keyspace: "customer"}
	tok, err := s.API().Hub.Token(ctx, def, testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	later := &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{
		{Keyspace: "customer", Shard: "-80", Gtid: "MariaDB/0-1914418711-70"},
		{Keyspace: "customer", Shard: "80-", Gtid: "MariaDB/0-1914418712-45"},
	}}
	tok2, err := s.API().Hub.Token(ctx, def, later)
	if err != nil {
		t.Fatal(err)
	}

	st.Down()
	for _, c := range []struct {
		method, target, body string
		ws                   bool
	}{
		{method: "POST", target: "/v1/streams/customers/subscribers/app/ack", body: `{"cursor":"` + tok + `"}`},
		{method: "GET", target: "/v1/streams/customers/subscribers/app"},
		{method: "GET", target: "/v1/streams/customers/changes?subscriber=newcomer"},
		{method: "GET", target: "/v1/streams/customers/sse?subscriber=newcomer"},
		{method: "GET", target: "/v1/streams/customers/ws?subscriber=newcomer", ws: true},
		{method: "POST", target: "/v1/streams", body: `{"name":"orders","keyspace":"customer","tables":["corder"]}`},
		{method: "DELETE", target: "/v1/streams/customers/subscribers/app"},
	} {
		var req *http.Request
		if c.body != "" {
			req = httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
		} else {
			req = httptest.NewRequest(c.method, c.target, nil)
		}
		if c.ws {
			wsHandshake(req)
		}
		resp, body := doRequest(t, h, req)
		var e struct{ Error struct{ Code string } }
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "store_unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s during the outage: %d %s (Retry-After %q), want 503 store_unavailable with Retry-After",
				c.method, c.target, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	if resp, body := doRequest(t, h, httptest.NewRequest(http.MethodGet, "/readyz", nil)); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(string(body), "store") {
		t.Errorf("/readyz during the outage: %d %s", resp.StatusCode, body)
	}
	// A reader with a cursor needs no store.
	if resp, body := doRequest(t, h, httptest.NewRequest(http.MethodGet, "/v1/streams/customers/changes?cursor="+tok, nil)); resp.StatusCode != http.StatusOK {
		t.Errorf("pull with a cursor during the outage: %d %s", resp.StatusCode, body)
	}
	st.Up()

	srv := httptest.NewServer(h)
	defer srv.Close()
	stored := func(t *testing.T, sub, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, body := doRequest(t, h, httptest.NewRequest(http.MethodGet, "/v1/streams/customers/subscribers/"+sub, nil))
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("subscriber %s: %d %s, want cursor %s stored", sub, resp.StatusCode, body, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	t.Run("websocket ack during the outage", func(t *testing.T) {
		wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/streams/customers/ws?subscriber=app&cursor=" + tok
		c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Subprotocols: []string{"vsg.v1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, _, err := c.Read(rctx); err != nil {
			t.Fatal(err)
		}
		st.Down()
		if err := c.Write(rctx, websocket.MessageText, []byte(`{"ack":"`+tok2+`"}`)); err != nil {
			t.Fatal(err)
		}
		// The connection keeps streaming (heartbeats) while the ack waits.
		for range 3 {
			if _, msg, err := c.Read(rctx); err != nil || !strings.Contains(string(msg), `"heartbeat"`) {
				t.Fatalf("read during the outage: %s, %v", msg, err)
			}
		}
		st.Up()
		stored(t, "app", tok2)
	})

	t.Run("sse Last-Event-ID during the outage", func(t *testing.T) {
		st.Down()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL+"/v1/streams/customers/sse?subscriber=wall", nil)
		req.Header.Set("Last-Event-ID", tok2)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sse with Last-Event-ID during the outage: %d", resp.StatusCode)
		}
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(line, "event: heartbeat") {
				break
			}
		}
		st.Up()
		stored(t, "wall", tok2)
	})
}
