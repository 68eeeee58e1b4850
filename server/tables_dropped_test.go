package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
)

// DESIGN §4.1 rule 9, through the whole gateway: without --vtctld, the
// `MoveTables complete` of an on_gap fail stream's tables ends every
// reader online across it after its rows — a WebSocket closes (4011,
// reason tables_dropped, after a disconnect message with the cursor
// before the DROP), an SSE stream ends with an error event, a poller's
// next page is a 409 tables_dropped — and a poller that comes back with
// the cursor before the DROP, to a gateway with no tail of the stream,
// gets the same 409. Each answer matches openapi.yaml.
func TestTablesDroppedEndsEveryReader(t *testing.T) {
	loadSpec(t)
	s0 := fakevtgate.Shard{Keyspace: "customer", Name: "0"}
	at := func(n int) *binlogdatapb.VGtid { return fakevtgate.VGtid("customer", "0", "MariaDB/0-1-"+itoa(n)) }
	fake := fakevtgate.New(t)
	fake.SetResult("show vitess_keyspaces", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Databases", "varchar"), "customer"))
	fake.SetResult("select * from `customer` limit 0", sqltypes.MakeTestResult(sqltypes.MakeTestFields("customer_id|email", "int64|varchar")))
	fake.SetCreateTable("customer", "CREATE TABLE `customer` (`customer_id` bigint(20) NOT NULL, `email` longtext, PRIMARY KEY (`customer_id`))")
	fake.SetResult("show tables like 'customer'", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Tables_in_customer", "varchar")))
	fake.SetTopology("customer", []string{"0"}, nil)
	h := newFakeVtgateServer(t, fake)
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	resp, body := doRequest(t, h, httptest.NewRequest("POST", "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer"],"on_gap":"fail"}`)))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	// The first poller starts the stream's tail at "now".
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{{s0.Pos(at(10))}}})
	resp, body = doRequest(t, h, httptest.NewRequest("GET", "/v1/streams/customers/changes?wait=0", nil))
	c10 := resp.Header.Get("Vsg-Next-Cursor")
	if resp.StatusCode != http.StatusOK || c10 == "" {
		t.Fatalf("first page: %d %s", resp.StatusCode, body)
	}
	tail := fake.Call(t, 0)

	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/streams/customers/ws?cursor="+c10, &websocket.DialOptions{Subprotocols: []string{"vsg.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	sseReq, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/streams/customers/sse?cursor="+c10, nil)
	sseResp, err := srv.Client().Do(sseReq)
	if err != nil {
		t.Fatal(err)
	}
	defer sseResp.Body.Close()
	sse := bufio.NewReader(sseResp.Body)

	field := s0.Field("customer", fakevtgate.BigintPK("customer_id"), fakevtgate.LongText("email"))
	row := func(n int) []*binlogdatapb.VEvent {
		return s0.Txn(100, at(n), s0.Insert("customer", 100, []string{itoa(n), "r" + itoa(n) + "@x"}))
	}
	tail.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{append([]*binlogdatapb.VEvent{field}, row(11)...), row(12)}})
	wsTypes := func(n int) []string {
		t.Helper()
		var got []string
		for len(got) < n {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("WebSocket after %v: %v", got, err)
			}
			var m struct{ Type, Reason, Cursor string }
			json.Unmarshal(msg, &m)
			if m.Type == "heartbeat" {
				continue
			}
			got = append(got, m.Type+":"+m.Reason)
			if m.Type == "disconnect" && m.Cursor == "" {
				t.Errorf("disconnect without a cursor: %s", msg)
			}
		}
		return got
	}
	sseEvents := func(n int) []string {
		t.Helper()
		var got []string
		var ev string
		for len(got) < n {
			line, err := sse.ReadString('\n')
			if err != nil {
				t.Fatalf("SSE after %v: %v", got, err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && ev != "heartbeat":
				var m struct{ Code string }
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m)
				got = append(got, ev+":"+m.Code)
			}
		}
		return got
	}
	if got := strings.Join(wsTypes(2), " "); got != "change: change:" {
		t.Fatalf("WebSocket: %s, want the two rows", got)
	}
	if got := strings.Join(sseEvents(2), " "); got != "change: change:" {
		t.Fatalf("SSE: %s, want the two rows", got)
	}
	resp, body = doRequest(t, h, httptest.NewRequest("GET", "/v1/streams/customers/changes?cursor="+c10, nil))
	c12 := resp.Header.Get("Vsg-Next-Cursor")
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), `"type":"change"`) != 2 {
		t.Fatalf("poller's page: %d %s, want the two rows", resp.StatusCode, body)
	}

	// complete: the DROP. Two VStreams will read it again later (a poller
	// back after the tail ended: a new tail from "now", and the poller's
	// own from its cursor), in either order.
	drop := []*binlogdatapb.VEvent{s0.Pos(at(13)), s0.DDL(100, "drop table if exists `vt_customer`.`customer`")}
	fake.Push(fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{drop}}, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{drop}})
	tail.Answer(t, fakevtgate.Script{Open: true, Batches: [][]*binlogdatapb.VEvent{drop}})

	if got := strings.Join(wsTypes(1), " "); got != "disconnect:tables_dropped" {
		t.Errorf("WebSocket at the DROP: %s, want a disconnect with reason tables_dropped", got)
	}
	if _, _, err := ws.Read(ctx); websocket.CloseStatus(err) != 4011 {
		t.Errorf("WebSocket closed with %v, want 4011", err)
	}
	if got := strings.Join(sseEvents(1), " "); got != "error:tables_dropped" {
		t.Errorf("SSE at the DROP: %s, want an error event tables_dropped", got)
	}

	// The poller's next page is a 409 tables_dropped — and so is a page
	// from the same cursor where no tail holds the stream any more.
	for i := range 2 {
		req := httptest.NewRequest("GET", "/v1/streams/customers/changes?wait=1&cursor="+c12, nil)
		resp, body = doRequest(t, h, req)
		var e apiError
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusConflict || e.Error.Code != "tables_dropped" || !strings.Contains(e.Error.Message, "customer") {
			t.Errorf("page %d after the rows: %d %s, want 409 tables_dropped", i+1, resp.StatusCode, body)
		}
		validateResponse(t, req, resp, body)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
