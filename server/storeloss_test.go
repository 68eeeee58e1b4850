package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStoreLossRecovery runs a gateway on a private redis-server without
// persistence and restarts it: the gateway says so (error log, metric,
// /readyz until restored), puts back the streams file, its cursor signing
// key and the cursors it stored, names the streams that are gone, and a
// named subscriber without a cursor gets a resync with reason store_lost.
func TestStoreLossRecovery(t *testing.T) {
	// The counter is the process's: what this run adds is what counts (-count).
	lostBefore := counterValue(t, "vsg_store_data_lost_total")
	node := redistest.StartNode(t, redistest.NodeOptions{Args: []string{"--save", "", "--appendonly", "no"}})
	dir := t.TempDir()
	file := filepath.Join(dir, "streams.yaml")
	if err := os.WriteFile(file, []byte("streams:\n  - name: fromfile\n    keyspace: customer\n    tables: [customer]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseFlags([]string{"--insecure-no-auth", "--redis", "redis://" + node.Addr() + "/0",
		"--streams-file", file, "--vtgate", deadAddr(t)}, env())
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, addr, served := startServing(ctx, t, cfg, log)
	defer func() { cancel(); <-served }()
	base := "http://" + addr
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// A stream defined through the API (without the schema check, which
	// needs vtgate).
	if err := s.streams.Upsert(ctx, &streams.Definition{Name: "fromapi", Keyspace: "customer", Tables: []string{"customer"}}); err != nil {
		t.Fatal(err)
	}
	def := &streams.Definition{Name: "fromfile", Keyspace: "customer"}
	tok, err := s.API().Hub.Token(ctx, def, testVGtid())
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call("POST", "/v1/streams/fromfile/subscribers/alice/ack", `{"cursor":"`+tok+`"}`); code != 200 {
		t.Fatalf("ack: %d %s", code, body)
	}

	// The guard's checks run every second; the loss report names the
	// streams of the last check that found the store intact, so one must
	// have seen the new stream before Redis goes.
	redistest.WaitFor(t, 10*time.Second, "an intact check that knows the stream", func() bool {
		p := s.streamsBefore.Load()
		return p != nil && slices.Contains(*p, "fromapi")
	})

	// Redis restarts empty.
	node.Kill()
	node.Restart(t)
	redistest.WaitFor(t, 20*time.Second, "the gateway to restore the streams file and the cursors", func() bool {
		code, body := call("GET", "/v1/streams/fromfile/subscribers/alice", "")
		return code == 200 && strings.Contains(body, tok)
	})
	// /readyz no longer reports the loss (vtgate, which this test does not
	// run, keeps it unready).
	redistest.WaitFor(t, 10*time.Second, "/readyz to stop reporting the loss", func() bool {
		_, body := call("GET", "/readyz", "")
		return strings.Contains(body, "vtgate") && !strings.Contains(body, "lost data")
	})
	out := logs.String()
	for _, want := range []string{"THE STORE LOST DATA", "how=wiped", `streams=[fromapi]`, "written=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := counterValue(t, "vsg_store_data_lost_total") - lostBefore; n != 1 {
		t.Errorf("metrics: vsg_store_data_lost_total rose by %v, want 1", n)
	}
	// The signing key is the one clients' tokens were made with.
	if code, body := call("POST", "/v1/streams/fromfile/subscribers/alice/ack", `{"cursor":"`+tok+`"}`); code != 200 {
		t.Fatalf("ack with a token from before the loss: %d %s", code, body)
	}
	if code, _ := call("GET", "/v1/streams/fromapi", ""); code != 404 {
		t.Errorf("the lost API stream: %d, want 404", code)
	}
	// A subscriber without a cursor is not started silently.
	code, body := call("GET", "/v1/streams/fromfile/changes?subscriber=bob", "")
	var page struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || len(page.Events) == 0 {
		t.Fatalf("pull as bob: %d %s", code, body)
	}
	if e := page.Events[0]; e["type"] != "resync" || e["reason"] != "store_lost" || e["subscriber"] != "bob" {
		t.Fatalf("first event for bob: %v, want a resync with reason store_lost", fmt.Sprint(e))
	}
}

// counterValue is the value of the unlabelled counter name in the
// gateway's registry.
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	return 0
}
