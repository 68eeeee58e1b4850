package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Webhook end-to-end tests: a real cluster, real gateway processes on the
// test Redis, and a receiver in the test process on 127.0.0.1 (hence
// --allow-private-webhooks).

// whGatewayFlags are the flags of every webhook test gateway: short
// retries and lease so that the tests run in seconds.
func whGatewayFlags(t *testing.T, extra ...string) []string {
	return append(append(withRedis(t), "--allow-private-webhooks",
		"--webhook-retry-min", "50ms", "--webhook-retry-max", "1s", "--webhook-lease-ttl", whLeaseTTL.String()), extra...)
}

// whLeaseTTL is the webhook lease time of the test gateways; whScan the
// interval at which a replica looks for webhooks to take (the webhook
// supervisor's default for that lease: a quarter of it).
const (
	whLeaseTTL = 3 * time.Second
	whScan     = whLeaseTTL / 4
)

// TestWebhookRecoversFromFailures: 10,000 row changes to a receiver that
// fails in every way for a while — 500s, answers slower than the timeout,
// refused connections, 429 and 503 with Retry-After (seconds and
// HTTP-date), and failures after it already processed a batch — and then
// recovers. Every change is delivered, every signature verifies, and after
// de-duplicating by webhook-id each change is seen exactly once, in order
// per shard.
func TestWebhookRecoversFromFailures(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// One shard: batches are checked in commit order across the stream.
	freshCluster(t, ctx)
	g := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g, "wh-recover")

	var r *whReceiver
	var outage sync.Once
	r = newWhReceiver(t, func(n int, m *whMsg) whAnswer {
		switch {
		case n < 3:
			return whAnswer{status: 500}
		case n == 3:
			return whAnswer{process: true, status: 500} // processed, then failed to answer
		case n < 6:
			return whAnswer{process: true, sleep: 1500 * time.Millisecond} // beyond the 1s timeout
		case n == 6:
			return whAnswer{status: 429, retryAfter: "1"}
		case n == 7:
			return whAnswer{status: 503, retryAfter: time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)}
		case n == 8:
			// A 2-second outage: connections refused.
			outage.Do(func() {
				go func() {
					r.down()
					time.AfterFunc(2*time.Second, r.up)
				}()
			})
			return whAnswer{status: 502}
		case n < 40 && n%5 == 0:
			return whAnswer{status: 503}
		case n < 40 && n%7 == 0:
			return whAnswer{process: true, status: 500}
		}
		return whAnswer{process: true}
	})
	wh := createWebhook(t, g, stream, map[string]any{
		"url": r.url(), "secret": r.secret, "max_attempts": 1000, "timeout": "1s", "batch_max_events": 500,
	})

	w := newWriter(t, "whr"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	start := time.Now()
	if err := w.insert(ctx, "rows", 10000); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted 10000 rows in %v", time.Since(start))
	want := w.since(0)
	r.waitRows(t, ctx, want)
	t.Logf("all delivered %v after the first insert, %d requests", time.Since(start), len(r.messages()))
	checkExactlyOnce(t, "webhook", r.processed(), want)
	r.checkSignatures(t)

	var failed int
	for _, m := range r.messages() {
		if m.status >= 300 {
			failed++
		}
	}
	if failed < 15 {
		t.Errorf("only %d failed attempts: the failure schedule did not run", failed)
	}
	v := getWebhook(t, g, stream, wh.ID)
	if v.DeadLetters != 0 || v.State != "active" || v.Cursor == "" {
		t.Errorf("webhook after recovery: %+v", v)
	}
}

// TestWebhookDeadLetterReplay: a batch the receiver refuses with 400 is
// dead-lettered at once (a permanent failure), one it keeps failing with
// 503 after max_attempts; later batches flow meanwhile, and replaying the
// dead letters delivers them under their original webhook-id.
func TestWebhookDeadLetterReplay(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// One shard: batches are checked in commit order across the stream.
	freshCluster(t, ctx)
	g := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g, "wh-dlq")
	var mu sync.Mutex
	fixed := false
	r := newWhReceiver(t, func(n int, m *whMsg) whAnswer {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range m.events {
			switch email := e.str("email"); {
			case fixed:
			case strings.Contains(email, "-poison400-"):
				return whAnswer{status: 400}
			case strings.Contains(email, "-poison503-"):
				return whAnswer{status: 503}
			}
		}
		return whAnswer{process: true}
	})
	wh := createWebhook(t, g, stream, map[string]any{
		"url": r.url(), "secret": r.secret, "max_attempts": 3, "batch_max_events": 1,
	})
	w := newWriter(t, "whd"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	for _, phase := range []struct {
		name string
		n    int
	}{{"a", 3}, {"poison400", 1}, {"b", 3}, {"poison503", 1}, {"c", 3}} {
		if err := w.insert(ctx, phase.name, phase.n); err != nil {
			t.Fatal(err)
		}
	}
	all := w.since(0)
	var good, poison []string
	for _, e := range all {
		if strings.Contains(e, "-poison") {
			poison = append(poison, e)
		} else {
			good = append(good, e)
		}
	}
	r.waitRows(t, ctx, good)
	eventually(t, time.Minute, "both bad batches to be dead-lettered", func() error {
		if n := getWebhook(t, g, stream, wh.ID).DeadLetters; n < 2 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	var page struct {
		DeadLetters []struct {
			Seq        int    `json:"seq"`
			ID         string `json:"id"`
			Reason     string `json:"reason"`
			Attempts   int    `json:"attempts"`
			LastStatus int    `json:"last_status"`
			Message    struct {
				Events []json.RawMessage `json:"events"`
			} `json:"message"`
			Replayed *struct{ Status int } `json:"replayed"`
		} `json:"dead_letters"`
	}
	base := "/v1/streams/" + stream + "/webhooks/" + wh.ID + "/dead-letters"
	if status, err := g.do(ctx, "GET", base, nil, &page); err != nil || status != 200 || len(page.DeadLetters) != 2 {
		t.Fatalf("dead letters: %d %v %+v", status, err, page)
	}
	d400, d503 := page.DeadLetters[0], page.DeadLetters[1]
	if d400.Reason != "permanent" || d400.Attempts != 1 || d400.LastStatus != 400 || len(d400.Message.Events) != 1 {
		t.Errorf("the 400 batch: %+v", d400)
	}
	if d503.Reason != "max_attempts" || d503.Attempts != 3 || d503.LastStatus != 503 {
		t.Errorf("the 503 batch: %+v", d503)
	}
	// The later batches flowed past the dead letters.
	checkExactlyOnce(t, "before replay", r.processed(), good)

	mu.Lock()
	fixed = true
	mu.Unlock()
	for _, d := range page.DeadLetters {
		var out struct {
			ID       string                `json:"id"`
			Replayed *struct{ Status int } `json:"replayed"`
		}
		status, err := g.do(ctx, "POST", fmt.Sprintf("%s/%d/replay", base, d.Seq), nil, &out)
		if err != nil || status != 200 || out.Replayed == nil || out.ID != d.ID {
			t.Fatalf("replay %d: %d %v %+v", d.Seq, status, err, out)
		}
		last := r.messages()[len(r.messages())-1]
		if last.id != d.ID {
			t.Errorf("replay of %s arrived as %s", d.ID, last.id)
		}
	}
	r.waitRows(t, ctx, poison)
	// Replays arrive after the batches that followed them: count only.
	got := map[string]int{}
	for _, e := range r.processed() {
		got[e.str("email")]++
	}
	for _, e := range all {
		if got[e] != 1 {
			t.Errorf("row %s processed %d times", e, got[e])
		}
	}
	r.checkSignatures(t)
	var status int
	if status, _ = g.do(ctx, "POST", base+"/99/replay", nil, nil); status != 404 {
		t.Errorf("replay of a missing dead letter: %d", status)
	}
}

// TestWebhookFailover: two gateways on one Redis; only one delivers. It is
// killed (SIGKILL) while the receiver holds one of its requests; the other
// takes over within the lease time, re-sends the in-flight batch under the
// same webhook-id, and nothing is lost.
func TestWebhookFailover(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// One shard, so that batches (checked in commit order) are deterministic.
	freshCluster(t, ctx)
	g1 := startGateway(t, whGatewayFlags(t)...)
	g2 := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g1, "wh-failover")

	held := make(chan *whMsg, 1)
	release := make(chan struct{})
	var hold sync.Once
	r := newWhReceiver(t, func(n int, m *whMsg) whAnswer {
		if n >= 20 {
			first := false
			hold.Do(func() { first = true })
			if first {
				held <- m
				<-release // the holder dies while this request is open
				return whAnswer{process: true}
			}
		}
		return whAnswer{process: true}
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	wh := createWebhook(t, g1, stream, map[string]any{"url": r.url(), "secret": r.secret, "batch_max_events": 20})

	w := newWriter(t, "whf"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	writeErr := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 60 && err == nil; i++ {
			err = w.insert(ctx, "rows", 50)
			// Pacing, not a wait: rows keep coming across the kill.
			time.Sleep(50 * time.Millisecond)
		}
		writeErr <- err
	}()

	var inflight *whMsg
	select {
	case inflight = <-held:
	case <-ctx.Done():
		t.Fatal("no request to hold")
	}
	// Before the kill: one replica owns the webhook, and requests never
	// overlapped.
	v := getWebhook(t, g2, stream, wh.ID)
	owner, survivor := g1, g2
	switch {
	case strings.Contains(v.Owner, fmt.Sprintf("/%d/", g1.cmd.Process.Pid)):
	case strings.Contains(v.Owner, fmt.Sprintf("/%d/", g2.cmd.Process.Pid)):
		owner, survivor = g2, g1
	default:
		t.Fatalf("owner %q is neither gateway (pids %d, %d)", v.Owner, g1.cmd.Process.Pid, g2.cmd.Process.Pid)
	}
	r.mu.Lock()
	conc := r.maxConc
	r.mu.Unlock()
	if conc != 1 {
		t.Errorf("%d concurrent requests before the kill: more than one replica delivers", conc)
	}
	killedAt := time.Now()
	owner.stop(syscall.SIGKILL)
	close(release)

	// The survivor re-sends the in-flight batch.
	var resent *whMsg
	eventually(t, time.Minute, "the surviving gateway to take the webhook over", func() error {
		for _, m := range r.messages() {
			if m != inflight && m.at.After(killedAt) {
				resent = m
				return nil
			}
		}
		return errors.New("no request since the kill")
	})
	takeover := resent.at.Sub(killedAt)
	t.Logf("takeover: first request from the survivor %v after SIGKILL (lease %v, scan %v)", takeover, whLeaseTTL, whScan)
	checkTakeover(t, "webhook", takeover, whLeaseTTL, whScan)
	if resent.id != inflight.id || string(resent.body) != string(inflight.body) {
		t.Errorf("the in-flight batch %s came back as %s", inflight.id, resent.id)
	}
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	want := w.since(0)
	r.waitRows(t, ctx, want)
	checkExactlyOnce(t, "failover", r.processed(), want)
	r.checkSignatures(t)
	if v := getWebhook(t, survivor, stream, wh.ID); !strings.Contains(v.Owner, fmt.Sprintf("/%d/", survivor.cmd.Process.Pid)) {
		t.Errorf("owner after takeover: %q", v.Owner)
	}
}

// TestWebhookDeletedWithStream: deleting a stream deletes its webhooks and
// stops their deliverers; a stream created again under the same name starts
// with none. The receiver switches to the secret of a new webhook on the
// new stream, so a deliverer of the old webhook still running would show up
// as requests that fail verification (and as rows delivered twice).
func TestWebhookDeletedWithStream(t *testing.T) {
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := startGateway(t, whGatewayFlags(t)...)
	stream := newCustomerStream(t, g, "wh-del")
	r := newWhReceiver(t, nil)
	old := createWebhook(t, g, stream, map[string]any{"url": r.url(), "secret": r.secret})
	w := newWriter(t, "whdel"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
	if err := w.insert(ctx, "a", 3); err != nil {
		t.Fatal(err)
	}
	r.waitRows(t, ctx, w.since(0))

	if status, err := g.do(ctx, "DELETE", "/v1/streams/"+stream, nil, nil); err != nil || status != 204 {
		t.Fatalf("delete stream: %d %v", status, err)
	}
	g.createStream(t, map[string]any{"name": stream, "keyspace": "customer", "tables": []string{"customer"}})
	var list struct {
		Webhooks []whView `json:"webhooks"`
	}
	if status, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/webhooks", nil, &list); err != nil || status != 200 || len(list.Webhooks) != 0 {
		t.Fatalf("webhooks of the stream created again: %d %v %+v", status, err, list.Webhooks)
	}
	if status, _ := g.do(ctx, "GET", "/v1/streams/"+stream+"/webhooks/"+old.ID, nil, nil); status != 404 {
		t.Fatalf("the deleted stream's webhook: %d, want 404", status)
	}

	secret := newSecret()
	r.mu.Lock()
	r.secret = secret
	r.mu.Unlock()
	createWebhook(t, g, stream, map[string]any{"url": r.url(), "secret": secret})
	before := len(r.messages())
	if err := w.insert(ctx, "b", 3); err != nil {
		t.Fatal(err)
	}
	r.waitRows(t, ctx, w.since(3))
	r.checkSignatures(t)
	seen := map[string]int{}
	for _, m := range r.messages()[before:] {
		for _, e := range m.events {
			seen[e.str("email")]++
		}
	}
	for _, e := range w.since(3) {
		if seen[e] != 1 {
			t.Errorf("row %s delivered %d times after the stream was deleted and created again", e, seen[e])
		}
	}
}
