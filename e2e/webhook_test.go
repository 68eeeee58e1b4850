package e2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
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
func whGatewayFlags(extra ...string) []string {
	return append(append(withRedis(), "--allow-private-webhooks",
		"--webhook-retry-min", "50ms", "--webhook-retry-max", "1s", "--webhook-lease-ttl", "3s"), extra...)
}

func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
}

// whMsg is one request the receiver got.
type whMsg struct {
	id, sig   string
	ts        int64
	body      []byte
	events    []ev
	at        time.Time
	status    int
	processed bool // the receiver acted on it (whatever it answered)
}

// whAnswer is what the receiver does with a request.
type whAnswer struct {
	process    bool          // record its events as processed
	status     int           // 0: 204
	retryAfter string        // Retry-After header
	sleep      time.Duration // before answering (a timeout when longer than the webhook's)
}

// whReceiver verifies and records webhook requests; policy decides each
// answer (nil: process and 204).
type whReceiver struct {
	t      *testing.T
	secret string
	addr   string

	mu       sync.Mutex
	srv      *http.Server
	msgs     []*whMsg
	badSig   []string
	active   int
	maxConc  int
	policy   func(n int, m *whMsg) whAnswer
	arrivals map[string]time.Time // email → first arrival (processed)
	changed  chan struct{}
}

func newWhReceiver(t *testing.T, policy func(n int, m *whMsg) whAnswer) *whReceiver {
	r := &whReceiver{t: t, secret: newSecret(), policy: policy, arrivals: map[string]time.Time{}, changed: make(chan struct{})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	r.serve(l)
	t.Cleanup(func() { r.down() })
	return r
}

func (r *whReceiver) url() string { return "http://" + r.addr + "/hook" }

func (r *whReceiver) serve(l net.Listener) {
	srv := &http.Server{Handler: r}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(l)
}

// down closes the receiver: connections are refused until up.
func (r *whReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// up listens again on the same address.
func (r *whReceiver) up() {
	for i := 0; ; i++ {
		l, err := net.Listen("tcp", r.addr)
		if err == nil {
			r.serve(l)
			return
		}
		if i == 50 {
			r.t.Errorf("receiver cannot listen on %s again: %v", r.addr, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *whReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	m := &whMsg{id: req.Header.Get("webhook-id"), sig: req.Header.Get("webhook-signature"), body: body, at: time.Now()}
	m.ts, _ = strconv.ParseInt(req.Header.Get("webhook-timestamp"), 10, 64)
	var b struct {
		Type   string            `json:"type"`
		ID     string            `json:"id"`
		Events []json.RawMessage `json:"events"`
		Cursor string            `json:"cursor"`
	}
	if err := json.Unmarshal(body, &b); err != nil || b.Type != "changes" || b.ID != m.id || b.Cursor == "" {
		r.t.Errorf("malformed webhook body (id %s): %v: %.200s", m.id, err, body)
	}
	for _, raw := range b.Events {
		e, err := parseEvent(raw)
		if err != nil {
			r.t.Errorf("event: %v", err)
			continue
		}
		m.events = append(m.events, e)
	}
	r.mu.Lock()
	if !verifySignature(r.secret, m) {
		r.badSig = append(r.badSig, m.id)
	}
	r.active++
	r.maxConc = max(r.maxConc, r.active)
	n := len(r.msgs)
	r.msgs = append(r.msgs, m)
	policy := r.policy
	r.mu.Unlock()

	a := whAnswer{process: true}
	if policy != nil {
		a = policy(n, m)
	}
	if a.status == 0 {
		a.status = http.StatusNoContent
	}
	r.mu.Lock()
	m.status, m.processed = a.status, a.process
	if a.process {
		for _, e := range m.events {
			if _, ok := r.arrivals[e.str("email")]; !ok {
				r.arrivals[e.str("email")] = m.at
			}
		}
	}
	r.active--
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if a.sleep > 0 {
		select {
		case <-time.After(a.sleep):
		case <-req.Context().Done():
		}
	}
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(a.status)
}

// verifySignature checks a request the way a receiver following the
// Standard Webhooks specification does — written out here rather than
// taken from the gateway's package, so that the test is independent.
func verifySignature(secret string, m *whMsg) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || m.id == "" {
		return false
	}
	if d := time.Since(time.Unix(m.ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", m.id, m.ts)
	mac.Write(m.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(m.sig) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func (r *whReceiver) messages() []*whMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*whMsg(nil), r.msgs...)
}

// processed returns the change events of the processed messages,
// de-duplicated by webhook-id (first processing wins), in arrival order.
// Two messages with one id must have the same body.
func (r *whReceiver) processed() []ev {
	r.mu.Lock()
	defer r.mu.Unlock()
	bodies := map[string][]byte{}
	var out []ev
	for _, m := range r.msgs {
		if b, ok := bodies[m.id]; ok {
			if string(b) != string(m.body) {
				r.t.Errorf("webhook-id %s sent with two different bodies", m.id)
			}
			continue
		}
		if !m.processed {
			continue
		}
		bodies[m.id] = m.body
		for _, e := range m.events {
			if e.Type == "change" {
				out = append(out, e)
			}
		}
	}
	return out
}

// waitRows waits until every email of want was processed.
func (r *whReceiver) waitRows(t *testing.T, ctx context.Context, want []string) {
	t.Helper()
	for {
		r.mu.Lock()
		missing := 0
		for _, e := range want {
			if _, ok := r.arrivals[e]; !ok {
				missing++
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d rows never reached the receiver", missing, len(want))
		case <-ch:
		case <-time.After(time.Second):
		}
	}
}

func (r *whReceiver) checkSignatures(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.badSig) > 0 {
		t.Errorf("%d of %d requests failed signature verification (first: %s)", len(r.badSig), len(r.msgs), r.badSig[0])
	}
}

// whView is the part of the API's webhook object the tests read.
type whView struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Cursor      string `json:"cursor"`
	Owner       string `json:"owner"`
	DeadLetters int    `json:"dead_letters"`
	Secret      string `json:"secret"`
}

func createWebhook(t *testing.T, g *gateway, stream string, body map[string]any) *whView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v whView
	status, err := g.do(ctx, "POST", "/v1/streams/"+stream+"/webhooks", body, &v)
	if err != nil || status != http.StatusCreated || v.ID == "" {
		t.Fatalf("create webhook: %d %+v %v", status, v, err)
	}
	return &v
}

func getWebhook(t *testing.T, g *gateway, stream, id string) *whView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v whView
	if status, err := g.do(ctx, "GET", "/v1/streams/"+stream+"/webhooks/"+id, nil, &v); err != nil || status != 200 {
		t.Fatalf("get webhook: %d %v", status, err)
	}
	return &v
}

func newCustomerStream(t *testing.T, g *gateway, prefix string) string {
	name := uniqueName(prefix)
	g.createStream(t, map[string]any{"name": name, "keyspace": "customer", "tables": []string{"customer"}})
	return name
}

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
	g := startGateway(t, whGatewayFlags()...)
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
					time.Sleep(2 * time.Second)
					r.up()
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
	g := startGateway(t, whGatewayFlags()...)
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
	for getWebhook(t, g, stream, wh.ID).DeadLetters < 2 {
		select {
		case <-ctx.Done():
			t.Fatal("the bad batches were not dead-lettered")
		case <-time.After(100 * time.Millisecond):
		}
	}
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
	g1 := startGateway(t, whGatewayFlags()...)
	g2 := startGateway(t, whGatewayFlags()...)
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
	for resent == nil {
		for _, m := range r.messages() {
			if m != inflight && m.at.After(killedAt) {
				resent = m
				break
			}
		}
		if resent == nil {
			select {
			case <-ctx.Done():
				t.Fatal("nobody took over")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	takeover := resent.at.Sub(killedAt)
	t.Logf("takeover: first request from the survivor %v after SIGKILL (lease 3s)", takeover)
	if takeover > 3*time.Second+3*time.Second {
		t.Errorf("takeover took %v with a 3s lease", takeover)
	}
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

// TestWebhookThroughput measures (VSG_BENCH=1): delivered events/s to a
// fast local receiver replaying a backlog in batches of 1,000, and at a
// steady 1,000 rows/s, commit→delivery latency percentiles and Redis
// writes per delivered event, with batch_max_wait 0 (the default) and
// 100ms.
func TestWebhookThroughput(t *testing.T) {
	needE2E(t)
	if !benchEnabled() {
		t.Skip("set VSG_BENCH=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g := startGateway(t, whGatewayFlags()...)
	stream := newCustomerStream(t, g, "wh-bench")
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// 1. Backlog replay.
	const rows = 100000
	from := initialCursor(t, ctx, g, stream)
	tag := uniqueName("whb")
	loadStart := time.Now()
	for done := 0; done < rows; done += 1000 {
		var sb strings.Builder
		sb.WriteString("insert into customer(email) values ")
		for i := 0; i < 1000; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('%s-%d@bench')", tag, done+i)
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("loaded %d rows in %v", rows, time.Since(loadStart))
	var n int
	var last time.Time
	var mu sync.Mutex
	done := make(chan struct{})
	finished := done
	fast := newWhReceiver(t, func(_ int, m *whMsg) whAnswer {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range m.events {
			if strings.HasPrefix(e.str("email"), tag+"-") {
				n++
			}
		}
		last = m.at
		if n >= rows && done != nil {
			close(done)
			done = nil
		}
		return whAnswer{process: false} // counted here; skip the receiver's bookkeeping
	})
	start := time.Now()
	replay := createWebhook(t, g, stream, map[string]any{"url": fast.url(), "secret": fast.secret, "batch_max_events": 1000, "cursor": from})
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatalf("replay: %d of %d events", n, rows)
	}
	secs := last.Sub(start).Seconds()
	t.Logf("RESULT webhook replay: %d events in %.2fs = %.0f events/s (%d requests)", rows, secs, float64(rows)/secs, len(fast.messages()))
	fast.checkSignatures(t)
	deleteWebhook(t, g, stream, replay.ID) // it would also deliver the next phases' rows

	// 2. Steady 1,000 rows/s.
	for _, wait := range []string{"0s", "100ms"} {
		steadyLatency(t, ctx, g, db, wait)
	}
}

func benchEnabled() bool { return os.Getenv("VSG_BENCH") == "1" }

// steadyLatency inserts 1,000 rows/s for 20s into a fresh stream with a
// webhook and reports commit→delivery latency and Redis writes per event.
func steadyLatency(t *testing.T, ctx context.Context, g *gateway, db *sql.DB, batchWait string) {
	stream := newCustomerStream(t, g, "wh-steady")
	r := newWhReceiver(t, nil)
	wh := createWebhook(t, g, stream, map[string]any{"url": r.url(), "secret": r.secret, "batch_max_wait": batchWait})
	defer deleteWebhook(t, g, stream, wh.ID)
	tag := uniqueName("whs")
	const rate, seconds, workers = 1000, 20, 128
	before := redisWrites(t)
	histBefore := scrapeHistogram(t, g)
	commits := make(map[string]time.Time, rate*seconds)
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				email := fmt.Sprintf("%s-%06d@steady", tag, i)
				if _, err := db.ExecContext(ctx, "insert into customer(email) values (?)", email); err != nil {
					t.Error(err)
					return
				}
				at := time.Now()
				mu.Lock()
				commits[email] = at
				mu.Unlock()
			}
		}()
	}
	// Paced by schedule rather than by a ticker, which drops ticks when the
	// loop falls behind: a late row is followed by the ones it delayed.
	begin := time.Now()
	for i := 0; i < rate*seconds; i++ {
		if d := time.Until(begin.Add(time.Duration(i) * time.Second / rate)); d > 0 {
			time.Sleep(d)
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(begin)
	var want []string
	for e := range commits {
		want = append(want, e)
	}
	r.waitRows(t, ctx, want)
	var lat []time.Duration
	r.mu.Lock()
	for e, c := range commits {
		lat = append(lat, max(r.arrivals[e].Sub(c), 0))
	}
	r.mu.Unlock()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	reqs := len(r.messages())
	writes, which := writesSince(t, before)
	t.Logf("RESULT steady %d rows/s (achieved %.0f/s), batch_max_wait %s: latency p50 %v p99 %v max %v; %d requests (%.1f events each); Redis writes %d (%s) = %.3f per event",
		rate, float64(len(lat))/elapsed.Seconds(), batchWait, pct(0.5).Round(100*time.Microsecond), pct(0.99).Round(100*time.Microsecond),
		lat[len(lat)-1].Round(time.Millisecond), reqs, float64(len(lat))/float64(reqs), writes, which, float64(writes)/float64(len(lat)))
	t.Logf("gateway side (read → 2xx, per batch): %s", histogramDelta(histBefore, scrapeHistogram(t, g)))
	// Concurrent writers: commit order is not insertion order, so only
	// exactly-once is checked here.
	seen := map[string]int{}
	for _, e := range r.processed() {
		seen[e.str("email")]++
	}
	for _, e := range want {
		if seen[e] != 1 {
			t.Errorf("row %s delivered %d times", e, seen[e])
		}
	}
}

func deleteWebhook(t *testing.T, g *gateway, stream, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if status, err := g.do(ctx, "DELETE", "/v1/streams/"+stream+"/webhooks/"+id, nil, nil); err != nil || status != 204 {
		t.Errorf("delete webhook: %d %v", status, err)
	}
}

// scrapeHistogram reads the gateway's webhook delivery latency histogram
// (gateway read → receiver 2xx, per batch): cumulative count per bucket
// bound, summed over webhooks.
func scrapeHistogram(t *testing.T, g *gateway) map[float64]float64 {
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := map[float64]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "vsg_webhook_delivery_latency_seconds_bucket{") {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.Index(line[i+4:], `"`)
		le, err := strconv.ParseFloat(line[i+4:i+4+j], 64)
		if err != nil {
			le = 1e9 // +Inf
		}
		c, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		sum[le] += c
	}
	return sum
}

// histogramDelta reports bucket-bound percentiles of what was observed
// between two scrapes.
func histogramDelta(before, after map[float64]float64) string {
	var les []float64
	for le := range after {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 {
		return "no histogram"
	}
	total := after[les[len(les)-1]] - before[les[len(les)-1]]
	at := func(p float64) string {
		for _, le := range les {
			if after[le]-before[le] >= p*total {
				return fmt.Sprintf("<= %gs", le)
			}
		}
		return "?"
	}
	return fmt.Sprintf("p50 %s, p99 %s of %.0f batches", at(0.5), at(0.99), total)
}

// redisWrites returns the calls of each write command in the test Redis's
// INFO commandstats (commands run inside Lua scripts are counted there
// too, so a fenced write counts as its one HSET).
func redisWrites(t *testing.T) map[string]int64 {
	addr := strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(c)
	head, err := rd.ReadString('\n') // a bulk string: $<length>
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO commandstats: %q %v", head, err)
	}
	size, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	buf := make([]byte, size)
	if _, err := io.ReadFull(rd, buf); err != nil {
		t.Fatal(err)
	}
	writes := map[string]bool{"set": true, "hset": true, "hdel": true, "del": true, "unlink": true, "xadd": true,
		"xtrim": true, "xdel": true, "incr": true, "incrby": true, "hsetnx": true, "setnx": true, "expire": true,
		"pexpire": true, "hincrby": true, "lpush": true, "rpush": true}
	out := map[string]int64{}
	for _, line := range strings.Split(string(buf), "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !writes[strings.ToLower(name)] {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, _ := strconv.ParseInt(calls, 10, 64)
		out[name] = v
	}
	return out
}

// writesSince sums the write calls since before, and names them.
func writesSince(t *testing.T, before map[string]int64) (int64, string) {
	var total int64
	var parts []string
	for name, v := range redisWrites(t) {
		if d := v - before[name]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s=%d", name, d))
		}
	}
	sort.Strings(parts)
	return total, strings.Join(parts, " ")
}
