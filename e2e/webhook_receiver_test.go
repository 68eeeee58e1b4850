package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The receiver side of the webhook end-to-end tests: an HTTP server in the
// test process that verifies signatures on its own and records what it got.

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
}

func newWhReceiver(t *testing.T, policy func(n int, m *whMsg) whAnswer) *whReceiver {
	r := &whReceiver{t: t, secret: newSecret(), policy: policy, arrivals: map[string]time.Time{}}
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

// up listens again on the same address (which the closed listener may
// hold for a moment). It may run on a goroutine of its own, so it reports
// rather than stops the test.
func (r *whReceiver) up() {
	err := eventuallyCtx(context.Background(), 5*time.Second, "the receiver to listen on "+r.addr+" again", func() error {
		l, err := net.Listen("tcp", r.addr)
		if err != nil {
			return err
		}
		r.serve(l)
		return nil
	})
	if err != nil {
		r.t.Error(err)
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
func (r *whReceiver) processed() []ev { return r.processedOf("change") }

// processedOf is processed for events of type typ (control events too).
func (r *whReceiver) processedOf(typ string) []ev {
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
			if e.Type == typ {
				out = append(out, e)
			}
		}
	}
	return out
}

// waitRows waits until every email of want was processed, for as long as
// ctx lasts.
func (r *whReceiver) waitRows(t *testing.T, ctx context.Context, want []string) {
	t.Helper()
	err := eventuallyCtx(ctx, 0, fmt.Sprintf("%d rows to reach the receiver", len(want)), func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		missing := 0
		for _, e := range want {
			if _, ok := r.arrivals[e]; !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d rows missing", missing, len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
	// Webhooks live in the tests' shared Redis: one left behind would be
	// delivered by every later gateway, to a receiver's port that another
	// test's receiver may have by then.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if status, err := g.do(ctx, "DELETE", "/v1/streams/"+stream+"/webhooks/"+v.ID, nil, nil); err != nil && status != http.StatusNotFound {
			t.Logf("webhook %s not deleted (its gateway may be gone): %d %v", v.ID, status, err)
		}
	})
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
