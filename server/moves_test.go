package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
)

// A MoveTables cutover of one of a stream's two tables cannot be followed
// (DESIGN §4.1): the stream stays on its keyspace and says why, in its
// definition (validated against openapi.yaml) and by a metric, once per
// cutover however often the journal is read.
func TestOnMovePartialBlocks(t *testing.T) {
	loadSpec(t)
	s, _ := newTestServer(t)
	s.streams = s.api.Streams
	h := s.Router()
	req := httptest.NewRequest("POST", "/v1/streams", strings.NewReader(`{"name":"pm","keyspace":"customer","tables":["customer","corder"]}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, got := doRequest(t, h, req); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, got)
	}
	j := &reshard.Journal{Key: "j-partial", Keyspace: "customer", ID: 7, Participants: []string{"0"},
		Local: map[string]string{"0": "MariaDB/0-1-50"}, Targets: []reshard.ShardPos{{Shard: "0", Gtid: "MariaDB/0-2-9"}},
		Tables: []string{"customer"}, Kind: reshard.KindTables, TargetKeyspace: "commerce", SeenAt: time.Now().Add(time.Minute)}
	before := partialMoves(t)
	for range 2 {
		if err := s.onMove(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	if n := partialMoves(t) - before; n != 1 {
		t.Errorf("vsg_stream_partial_moves_total{stream=pm} grew by %v, want 1", n)
	}
	resp, got := doRequest(t, h, httptest.NewRequest("GET", "/v1/streams/pm", nil))
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d %s", resp.StatusCode, got)
	}
	var def struct {
		Keyspace string `json:"keyspace"`
		Moves    []any  `json:"moves"`
		Blocked  *struct {
			Reason, Journal, From, To string
			Tables                    []string
		} `json:"blocked"`
	}
	if err := json.Unmarshal(got, &def); err != nil {
		t.Fatal(err)
	}
	b := def.Blocked
	if def.Keyspace != "customer" || len(def.Moves) != 0 || b == nil || b.Reason != "partial_move" || b.Journal != "j-partial" ||
		b.From != "customer" || b.To != "commerce" || len(b.Tables) != 1 || b.Tables[0] != "customer" {
		t.Errorf("GET /v1/streams/pm: %s, want keyspace customer, no move, blocked by the partial move of customer", got)
	}
}

func partialMoves(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.StreamPartialMovesCounter("pm").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The moves a stream followed and its blocked condition are the gateway's
// to record: a client that sends them on create gets a stream without
// them (a made-up move would send readers to another keyspace).
func TestCreateStreamIgnoresMovesAndBlocked(t *testing.T) {
	loadSpec(t)
	s, _ := newTestServer(t)
	h := s.Router()
	body := `{"name":"fake","keyspace":"customer","tables":["customer"],` +
		`"moves":[{"journal":"j","from":"customer","to":"commerce","tables":["customer"]}],` +
		`"blocked":{"reason":"partial_move","tables":["customer"],"from":"customer","to":"commerce","journal":"j"}}`
	req := httptest.NewRequest("POST", "/v1/streams", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if resp, got := doRequest(t, h, req); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, got)
	}
	resp, got := doRequest(t, h, httptest.NewRequest("GET", "/v1/streams/fake", nil))
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d %s", resp.StatusCode, got)
	}
	var def map[string]json.RawMessage
	if err := json.Unmarshal(got, &def); err != nil {
		t.Fatal(err)
	}
	if def["moves"] != nil || def["blocked"] != nil {
		t.Fatalf("a client's moves or blocked were stored: %s", got)
	}
}
