package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vsgclient "github.com/vstream-gateway/vstream-gateway/client"
)

// goClient reads a stream with the Go client (package client) and hands
// its events over as the e2e clients do (the client interface): each
// transaction's events in order, the last one marked TxnEnd. Asking for
// the next transaction commits the one before (and, for a named
// subscriber, acks it).
type goClient struct {
	c   *vsgclient.Client
	buf []ev
	// Control events seen, by type.
	mu       sync.Mutex
	controls map[string]int
}

func dialGoClient(ctx context.Context, g *gateway, stream string, opts ...vsgclient.Option) (*goClient, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := vsgclient.Dial(ctx, g.url, stream, append([]vsgclient.Option{vsgclient.WithLogger(log)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &goClient{c: c, controls: map[string]int{}}, nil
}

func (g *goClient) next(ctx context.Context) (ev, error) {
	for len(g.buf) == 0 {
		txn, err := g.c.Next(ctx)
		if err != nil {
			return ev{}, err
		}
		for i, e := range txn.Events {
			out := ev{Type: e.Type(), Cursor: txn.Cursor, TxnEnd: i == len(txn.Events)-1}
			if ch, ok := e.(*vsgclient.Change); ok {
				out.Op, out.Shard, out.Table = string(ch.Op), ch.Shard, ch.Table
				for _, img := range []struct {
					raw json.RawMessage
					to  *map[string]json.RawMessage
				}{{ch.Key, &out.Key}, {ch.Before, &out.Before}, {ch.After, &out.After}} {
					if img.raw != nil {
						if err := json.Unmarshal(img.raw, img.to); err != nil {
							return ev{}, err
						}
					}
				}
			} else {
				g.mu.Lock()
				g.controls[e.Type()]++
				g.mu.Unlock()
			}
			g.buf = append(g.buf, out)
		}
	}
	e := g.buf[0]
	g.buf = g.buf[1:]
	return e, nil
}

// ack is the client's own: commits ack by themselves.
func (g *goClient) ack(context.Context, string) error { return nil }

func (g *goClient) close() { g.c.Close() }

func (g *goClient) control(typ string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.controls[typ]
}

// requestCounter counts a client's HTTP requests by the last element of
// their path (a WebSocket handshake is one).
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	p := req.URL.Path
	r.mu.Lock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[p[strings.LastIndexByte(p, '/')+1:]]++
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *requestCounter) count(what string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[what]
}

// TestGoClientSIGKILLAndReshard reads a stream with the Go client, one
// named subscriber per transport, from a Redis-backed gateway, while a
// writer inserts rows without pause: the gateway is killed (SIGKILL) and
// started again, then customer is resharded 0 -> -80,80- and back to 0,
// each reshard switched and completed at once. Every row written reaches
// every reader exactly once, in order per shard, and each subscriber's
// stored cursor ends at the last transaction its reader committed.
func TestGoClientSIGKILLAndReshard(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	freshCluster(t, ctx)
	g := startGateway(t, append(withRedis(t), "--max-conns-per-token", "0")...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	stream := "goclient-" + suffix
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})

	type reader struct {
		*bgReader
		gc   *goClient
		sub  string
		reqs *requestCounter
	}
	var readers []*reader
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	var running sync.WaitGroup
	for _, tr := range []vsgclient.Transport{vsgclient.WebSocket, vsgclient.SSE, vsgclient.Poll} {
		r := &reader{sub: "gc-" + tr.String(), reqs: &requestCounter{}}
		gc, err := dialGoClient(ctx, g, stream, vsgclient.WithTransport(tr), vsgclient.WithSubscriber(r.sub),
			vsgclient.WithHTTPClient(&http.Client{Transport: r.reqs}), vsgclient.WithPoll(5*time.Second, 500))
		if err != nil {
			t.Fatalf("%s: %v", r.sub, err)
		}
		r.gc, r.bgReader = gc, &bgReader{name: r.sub, next: gc.next}
		readers = append(readers, r)
		running.Add(1)
		go func() { defer running.Done(); r.run(rctx) }()
	}
	has := func(want []string) bool {
		for _, r := range readers {
			if !r.has(want) {
				return false
			}
		}
		return true
	}
	w := newSteadyWriter(t, "gc"+suffix)
	waitRows := func(what string) {
		t.Helper()
		var want []string
		for email := range w.insertedAt() {
			want = append(want, email)
		}
		if !waitUntil(ctx, 3*time.Minute, func() bool { return has(want) }) {
			for _, r := range readers {
				got, _, err := r.snapshot()
				t.Logf("%s: %d rows, err %v", r.name, len(got), err)
			}
			t.Fatalf("%s: not every reader got the %d rows written so far within 3 minutes", what, len(want))
		}
	}

	w.start(ctx, 20*time.Millisecond)
	waitRows("before the kill")

	killedAt := time.Now()
	g.restart(syscall.SIGKILL)
	t.Logf("gateway killed and ready again in %v", time.Since(killedAt).Round(time.Millisecond))
	waitRows("after the restart")

	reshardStep(t, ctx, "gcsplit", "0", "-80,80-")
	waitBridged(t, ctx, g, "0", "-80,80-")
	waitRows("after the split")
	reshardStep(t, ctx, "gcmerge", "-80,80-", "0")
	waitBridged(t, ctx, g, "-80,80-", "0")
	waitRows("after the merge")

	w.stopWriting()
	w.sentinels(t, ctx, sentinels)
	want, failed := w.settle(t, ctx)
	if !waitUntil(ctx, 3*time.Minute, func() bool { return has(want) }) {
		t.Error("not every reader got every row within 3 minutes")
	}
	stopReaders()
	running.Wait()

	var results []string
	for _, r := range readers {
		got, _, err := r.snapshot()
		if err != nil {
			t.Errorf("%s stopped: %v", r.name, err)
		}
		checkExactlyOnce(t, r.name, got, want)
		lost, dup := tally(got, want)
		last := r.gc.c.Cursor()
		if err := r.gc.c.Close(); err != nil {
			t.Errorf("%s: close: %v", r.name, err)
		}
		if err := waitAcked(ctx, g, stream, r.sub, last); err != nil {
			t.Errorf("%s: the last commit is not the stored cursor: %v", r.name, err)
		}
		conns := r.reqs.count("ws") + r.reqs.count("sse")
		if conns == 0 {
			conns = r.reqs.count("changes")
		}
		results = append(results, fmt.Sprintf("%s got=%d lost=%d dup=%d reshard_events=%d requests=%d acks_posted=%d",
			r.name, len(got), lost, dup, r.gc.control("reshard"), conns, r.reqs.count("ack")))
	}
	t.Logf("RESULT rows=%d failed_inserts=%d; %s", len(want), failed, strings.Join(results, "; "))
}
