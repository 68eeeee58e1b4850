package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
)

// safe_to_complete is judged on the subscribers' states, never on bridge
// statuses: a replica killed mid-bridge leaves its status in_progress,
// and a subscriber that read across the cutover since pins nothing (the
// soak's split waited minutes on one). A subscriber still behind the
// cutover pins the old shards whatever the statuses say.
func TestSafeToCompleteJudgesSubscribers(t *testing.T) {
	loadSpec(t)
	fake := fakevtgate.New(t)
	fake.SetResult("show vitess_keyspaces", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Databases", "varchar"), "customer"))
	fake.SetResult("select * from `customer` limit 0", sqltypes.MakeTestResult(sqltypes.MakeTestFields("customer_id|email", "int64|varchar")))
	fake.SetCreateTable("customer", "CREATE TABLE `customer` (`customer_id` bigint(20) NOT NULL, `email` longtext, PRIMARY KEY (`customer_id`))")
	fake.SetResult("show tables like 'customer'", sqltypes.MakeTestResult(sqltypes.MakeTestFields("Tables_in_customer", "varchar")))
	fake.SetTopology("customer", []string{"-80", "80-"}, []string{"0"}) // switched, not completed
	cfg, err := ParseFlags([]string{"--insecure-no-auth", "--vtgate", fake.Addr, "--data-dir", filepath.Join(t.TempDir(), "data")}, env())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeBackends)
	h := s.Handler()
	ctx := context.Background()

	resp, body := doRequest(t, h, httptest.NewRequest("POST", "/v1/streams", strings.NewReader(`{"name":"customers","keyspace":"customer","tables":["customer"]}`)))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	targets := fakevtgate.VGtid("customer", "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5")
	j, ok := reshard.FromEvent("customer", "0", &binlogdatapb.Journal{Id: 7, MigrationType: binlogdatapb.MigrationType_SHARDS,
		LocalPosition: "MariaDB/0-1-20", ShardGtids: targets.ShardGtids,
		Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: "customer", Shard: "0"}}})
	if !ok {
		t.Fatal("not a reshard journal")
	}
	if _, err := s.journals.Record(ctx, j); err != nil {
		t.Fatal(err)
	}
	// bob read across the cutover while a replica that died bridged him.
	if _, err := s.hub.Cursors().Ack(ctx, "customers", "bob", fakevtgate.VGtid("customer", "-80", "MariaDB/0-2-9", "80-", "MariaDB/0-3-9")); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(map[string]any{"journal": j.Key, "stream": "customers", "subscriber": "bob", "state": "in_progress",
		"events": 0, "bytes": 0, "started": time.Now().UTC()})
	if err := s.store.Put(ctx, "bridges/customer", j.Key+"/customers/bob", stale); err != nil {
		t.Fatal(err)
	}
	report := func() (safe bool, blocking []string, states []string) {
		t.Helper()
		resp, body := doRequest(t, h, httptest.NewRequest("GET", "/v1/reshards", nil))
		var out struct {
			Reshards []struct {
				Safe     bool `json:"safe_to_complete"`
				Blocking []struct {
					Subscriber string `json:"subscriber"`
				} `json:"blocking_subscribers"`
				Bridges []struct {
					State string `json:"state"`
				} `json:"bridges"`
			} `json:"reshards"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil || len(out.Reshards) != 1 {
			t.Fatalf("GET /v1/reshards: %d %s", resp.StatusCode, body)
		}
		r := out.Reshards[0]
		for _, b := range r.Blocking {
			blocking = append(blocking, b.Subscriber)
		}
		for _, b := range r.Bridges {
			states = append(states, b.State)
		}
		return r.Safe, blocking, states
	}
	if safe, blocking, states := report(); !safe || len(blocking) != 0 || len(states) != 1 || states[0] != "in_progress" {
		t.Fatalf("safe %v, blocking %v, bridges %v: want safe, the stale status listed", safe, blocking, states)
	}
	// alice is behind the cutover and not bridged: she pins the old shard.
	if _, err := s.hub.Cursors().Ack(ctx, "customers", "alice", fakevtgate.VGtid("customer", "0", "MariaDB/0-1-10")); err != nil {
		t.Fatal(err)
	}
	if safe, blocking, _ := report(); safe || len(blocking) != 1 || blocking[0] != "alice" {
		t.Fatalf("safe %v, blocking %v: want alice blocking", safe, blocking)
	}
}
