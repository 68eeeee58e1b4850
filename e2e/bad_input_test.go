package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// answer is one HTTP answer of the gateway as a client sees it.
type answer struct {
	status     int
	code, msg  string
	retryAfter string
	took       time.Duration
}

func ask(t *testing.T, ctx context.Context, g *gateway, method, path, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start)}
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode >= 400 {
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&e); err != nil {
			t.Errorf("%s %s: %d with a body that is not a JSON error: %q", method, path, resp.StatusCode, b)
		}
	}
	a.code, a.msg = e.Error.Code, e.Error.Message
	return a
}

// TestBadInputStatuses: a stream on a keyspace, table or column vtgate does
// not know is refused with a 400 that names it; while vtgate is down,
// what needs its answer at once gets a 503 with Retry-After, and a reader
// with a cursor still gets a 200. Never a 500.
func TestBadInputStatuses(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cluster.Up(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.StartVtgate(context.Background()); err != nil {
			t.Errorf("start vtgate after the test: %v", err)
		}
	})
	g := startGateway(t, whGatewayFlags(t)...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)

	for _, c := range []struct {
		name, body, mentions string
	}{
		{"unknown keyspace", `{"name":"bad-` + suffix + `","keyspace":"nosuch","tables":["customer"]}`, `keyspace "nosuch" does not exist`},
		{"unknown keyspace, regex rules", `{"name":"bad-` + suffix + `","keyspace":"nosuch","rules":[{"match":"/.*/"}]}`, `keyspace "nosuch" does not exist`},
		{"unknown table, sharded keyspace", `{"name":"bad-` + suffix + `","keyspace":"customer","tables":["customer","nosuch"]}`, `tables[1]: table "nosuch" does not exist in keyspace "customer"`},
		{"unknown table, unsharded keyspace", `{"name":"bad-` + suffix + `","keyspace":"commerce","tables":["nosuch"]}`, `tables[0]: table "nosuch" does not exist in keyspace "commerce"`},
		{"unknown column", `{"name":"bad-` + suffix + `","keyspace":"customer","rules":[{"match":"customer","filter":"select customer_id, nope from customer"}]}`, `rules[0]: table "customer" has no column "nope"`},
	} {
		a := ask(t, ctx, g, "POST", "/v1/streams", c.body)
		if a.status != http.StatusBadRequest || a.code != "invalid_stream" || !strings.Contains(a.msg, c.mentions) {
			t.Errorf("%s: %d %s %q; want 400 invalid_stream naming %s", c.name, a.status, a.code, a.msg, c.mentions)
		} else {
			t.Logf("%s: 400 %s: %s", c.name, a.code, a.msg)
		}
	}

	read, idle := "read-"+suffix, "idle-"+suffix
	g.createStream(t, map[string]any{"name": read, "keyspace": "customer", "tables": []string{"customer"}})
	g.createStream(t, map[string]any{"name": idle, "keyspace": "customer", "tables": []string{"customer"}})
	cursor := initialCursor(t, ctx, g, read)

	if err := cluster.StopVtgate(ctx); err != nil {
		t.Fatal(err)
	}
	unavailable := func(name string, a answer) {
		t.Helper()
		if a.status != http.StatusServiceUnavailable || a.code != "upstream_unavailable" || a.retryAfter == "" {
			t.Errorf("%s with vtgate down: %d %s %q, Retry-After %q; want 503 upstream_unavailable with Retry-After", name, a.status, a.code, a.msg, a.retryAfter)
			return
		}
		t.Logf("%s with vtgate down: 503 %s after %v, Retry-After %s: %s", name, a.code, a.took.Round(100*time.Millisecond), a.retryAfter, a.msg)
	}
	unavailable("create a stream", ask(t, ctx, g, "POST", "/v1/streams", `{"name":"new-`+suffix+`","keyspace":"customer","tables":["customer"]}`))
	unavailable("pull from now", ask(t, ctx, g, "GET", "/v1/streams/"+idle+"/changes", ""))
	unavailable("SSE from now", ask(t, ctx, g, "GET", "/v1/streams/"+idle+"/sse", ""))
	unavailable("create a webhook", ask(t, ctx, g, "POST", "/v1/streams/"+idle+"/webhooks", `{"url":"http://127.0.0.1:9/hook"}`))
	// A reader with a cursor needs nothing from vtgate to start: it waits.
	if a := ask(t, ctx, g, "GET", "/v1/streams/"+read+"/changes?wait=1s&cursor="+cursor, ""); a.status != http.StatusOK {
		t.Errorf("pull with a cursor, vtgate down: %d %s %q; want 200", a.status, a.code, a.msg)
	}
	if a := ask(t, ctx, g, "GET", "/v1/streams/"+idle+"/changes?wait=1s&cursor="+cursor, ""); a.status != http.StatusBadRequest || a.code != "invalid_cursor" {
		t.Errorf("another stream's cursor, vtgate down: %d %s; want 400 invalid_cursor", a.status, a.code)
	}

	if err := cluster.StartVtgate(ctx); err != nil {
		t.Fatal(err)
	}
	if a := ask(t, ctx, g, "POST", "/v1/streams", `{"name":"new-`+suffix+`","keyspace":"customer","tables":["customer"]}`); a.status != http.StatusCreated {
		t.Errorf("create after vtgate returned: %d %s %q", a.status, a.code, a.msg)
	}
}
