package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// A fake binlog: transaction n (1-based) ends at GTID set 1-n of one
// server, so positions compare like real ones (position.Compare).
const fakeUUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

func fakePos(n int) *binlogdatapb.VGtid {
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{
		Keyspace: "ks", Shard: "0", Gtid: fmt.Sprintf("MySQL56/%s:1-%d", fakeUUID, n),
	}}}
}

func posN(v *binlogdatapb.VGtid) int {
	if v == nil || len(v.ShardGtids) == 0 {
		return 0
	}
	g := v.ShardGtids[0].Gtid
	n, _ := strconv.Atoi(g[strings.LastIndex(g, "-")+1:])
	return n
}

type fakeLog struct {
	mu      sync.Mutex
	txns    []*source.Txn
	changed chan struct{}
	// ended, when set, is what a feed that has read every transaction
	// gets: the stream ended (upstream.TablesDroppedError).
	ended error
}

// end makes the stream end with err after its last transaction.
func (l *fakeLog) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = err
	close(l.changed)
	l.changed = make(chan struct{})
}

// newFakeLog returns a log holding one position-only transaction, so that
// "now" is a concrete position from the start.
func newFakeLog() *fakeLog {
	l := &fakeLog{changed: make(chan struct{})}
	l.add(0)
	return l
}

// add appends one transaction with rows events (0: position-only),
// the row values being "r<n>" with n counting all rows so far.
func (l *fakeLog) add(rows int) {
	l.addChunked(rows)
}

// addChunked appends one transaction delivered in pieces of the given
// numbers of events (DESIGN §3.1): all but the last Partial at the
// position before it, all but the first Continued. With one piece it is
// a whole transaction, as add makes.
func (l *fakeLog) addChunked(pieces ...int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.lastLocked()
	n, i := before+1, 0
	for k, rows := range pieces {
		t := &source.Txn{VGtid: fakePos(n), CommitTS: time.Now().Unix(), Received: time.Now(),
			Partial: k < len(pieces)-1, Continued: k > 0}
		if t.Partial {
			t.VGtid = fakePos(before)
		}
		for range rows {
			t.Events = append(t.Events, event.Event{Type: event.TypeChange, Op: event.OpInsert, Keyspace: "ks", Table: "t",
				JSON: fmt.Appendf(nil, `{"type":"change","op":"insert","table":"t","after":{"txn":%d,"i":%d}`, n, i)})
			i++
		}
		l.txns = append(l.txns, t)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// lastLocked is the position after the log's last entry (0: empty).
func (l *fakeLog) lastLocked() int {
	if len(l.txns) == 0 {
		return 0
	}
	return posN(l.txns[len(l.txns)-1].VGtid)
}

// indexAfter is the index of the first entry after position p: the first
// that starts a transaction there.
func (l *fakeLog) indexAfter(p int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, t := range l.txns {
		before := 0
		if i > 0 {
			before = posN(l.txns[i-1].VGtid)
		}
		if before >= p && !t.Continued {
			return i
		}
	}
	return len(l.txns)
}

func (l *fakeLog) addN(txns, rowsEach int) {
	for range txns {
		l.add(rowsEach)
	}
}

func (l *fakeLog) at(i int) (*source.Txn, chan struct{}) {
	t, wait, _ := l.atOrEnd(i)
	return t, wait
}

// atOrEnd is at, or the stream's end past its last transaction.
func (l *fakeLog) atOrEnd(i int) (*source.Txn, chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i < len(l.txns) {
		return l.txns[i], nil, nil
	}
	return nil, l.changed, l.ended
}

func (l *fakeLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.txns)
}

// fakeSource opens feeds on the fake log, honouring a subscriber's stored
// cursor like hub.Open does.
type fakeSource struct {
	log     *fakeLog
	cursors *hub.Cursors
	mu      sync.Mutex
	opens   int
}

func (s *fakeSource) Open(ctx context.Context, def *streams.Definition, from hub.From) (Feed, error) {
	s.mu.Lock()
	s.opens++
	s.mu.Unlock()
	next := 0
	if from.Subscriber != "" {
		st, err := s.cursors.Get(ctx, def.Name, from.Subscriber)
		if err == nil {
			next = s.log.indexAfter(posN(st.VGtid))
		}
	}
	f := &fakeFeed{log: s.log, next: next}
	if from.Subscriber == "" && from.Token == "" {
		// Stream start "now": like vtgate, tell the current position at once.
		f.next = s.log.len()
		s.log.mu.Lock()
		now := s.log.lastLocked()
		s.log.mu.Unlock()
		f.first = &hub.Delivery{Txn: &source.Txn{VGtid: fakePos(now), Received: time.Now()}, Cursor: "tok-" + strconv.Itoa(now)}
	}
	return f, nil
}

type fakeFeed struct {
	log   *fakeLog
	next  int
	first *hub.Delivery
}

func (f *fakeFeed) deliver(t *source.Txn) *hub.Delivery {
	f.next++
	if t.Partial {
		return &hub.Delivery{Txn: t} // no cursor inside a transaction
	}
	return &hub.Delivery{Txn: t, Cursor: "tok-" + strconv.Itoa(posN(t.VGtid))}
}

func (f *fakeFeed) Next(ctx context.Context) (*hub.Delivery, error) {
	if d := f.first; d != nil {
		f.first = nil
		return d, nil
	}
	for {
		t, wait, err := f.log.atOrEnd(f.next)
		if t != nil {
			return f.deliver(t), nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait:
		}
	}
}

func (f *fakeFeed) TryNext(ctx context.Context) (*hub.Delivery, bool, error) {
	if d := f.first; d != nil {
		f.first = nil
		return d, true, nil
	}
	t, _, err := f.log.atOrEnd(f.next)
	if t == nil {
		return nil, false, err
	}
	return f.deliver(t), true, nil
}

func (f *fakeFeed) Close() {}

// fakeTokens mints "tok-<n>" for fake positions.
type fakeTokens struct{}

func (fakeTokens) Token(_ context.Context, _ *streams.Definition, pos *binlogdatapb.VGtid) (string, error) {
	return "tok-" + strconv.Itoa(posN(pos)), nil
}

func (fakeTokens) Position(_ context.Context, _ *streams.Definition, tok string) (*binlogdatapb.VGtid, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(tok, "tok-"))
	if err != nil || !strings.HasPrefix(tok, "tok-") {
		return nil, fmt.Errorf("malformed token %q", tok)
	}
	return fakePos(n), nil
}

type fakeStreams map[string]*streams.Definition

func (f fakeStreams) Get(_ context.Context, name string) (*streams.Definition, error) {
	if d, ok := f[name]; ok {
		return d, nil
	}
	return nil, streams.ErrNotFound
}

var testLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

var testDef = &streams.Definition{Name: "orders", Keyspace: "ks", Start: streams.StartNow}

// env is a service over a fresh embedded store and a fake binlog.
type env struct {
	t      *testing.T
	st     store.Store
	log    *fakeLog
	src    *fakeSource
	svc    *Service
	delays *delayLog
}

// delayLog records the waits between attempts and shortens them, so
// tests observe the schedule (Retry-After included) without sleeping it.
type delayLog struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (d *delayLog) sleep(ctx context.Context, dur time.Duration) error {
	d.mu.Lock()
	d.delays = append(d.delays, dur)
	d.mu.Unlock()
	return wait.Sleep(ctx, min(dur, 5*time.Millisecond))
}

func (d *delayLog) all() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Duration(nil), d.delays...)
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvOn(t, st, newFakeLog(), opts...)
}

// newEnvOn builds a service over an existing store and log: two of them
// on one store are two gateway replicas.
func newEnvOn(t *testing.T, st store.Store, l *fakeLog, opts ...Option) *env {
	cursors := hub.NewCursors(st)
	src := &fakeSource{log: l, cursors: cursors}
	e := &env{t: t, st: st, log: l, src: src, delays: &delayLog{}}
	base := []Option{
		WithSource(src), WithTokens(fakeTokens{}), WithCursors(cursors),
		WithAllowPrivate(true), WithMetrics(NewMetrics()), WithIdleAck(50 * time.Millisecond),
		WithBackoff(Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond, MaxRetryAfter: time.Hour}),
		WithLogger(testLogger),
	}
	e.svc = NewService(st, fakeStreams{testDef.Name: testDef}, nil, append(base, opts...)...)
	e.svc.sleep = e.delays.sleep
	return e
}

// create registers a webhook to url with the given settings.
func (e *env) create(url string, mod func(*CreateRequest)) *View {
	e.t.Helper()
	req := &CreateRequest{URL: url, Secret: testSecret}
	if mod != nil {
		mod(req)
	}
	v, err := e.svc.Create(context.Background(), testDef, req)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// supervise runs a supervisor until the test ends.
func (e *env) supervise(opts ...SupervisorOption) *Supervisor {
	sv := e.svc.NewSupervisor(append([]SupervisorOption{WithLeaseTTL(5 * time.Second)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sv.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
	return sv
}

// cursorN is the webhook's stored position (0: none).
func (e *env) cursorN(id string) int {
	st, err := hub.NewCursors(e.st).Get(context.Background(), testDef.Name, SubscriberName(id))
	if err != nil {
		return 0
	}
	return posN(st.VGtid)
}

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// message is one request a receiver got.
type message struct {
	ID, Timestamp, Signature string
	Body                     []byte
	Events                   []struct {
		After struct{ Txn, I int } `json:"after"`
	}
	Cursor string
	Part   int  // a part of a chunked transaction (0: whole ones)
	More   bool // more parts follow
	Status int
	At     time.Time
}

// receiver is an httptest server whose answer per request is decided by
// respond (nil: 204), recording every request.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	msgs    []*message
	respond func(n int, m *message, w http.ResponseWriter) bool // true: handled
	got     chan struct{}
	active  int
	maxConc int
}

func newReceiver(t *testing.T, respond func(n int, m *message, w http.ResponseWriter) bool) *receiver {
	return newReceiverOn(t, nil, respond)
}

// newReceiverOn serves on l (nil: a fresh loopback port).
func newReceiverOn(t *testing.T, l net.Listener, respond func(n int, m *message, w http.ResponseWriter) bool) *receiver {
	r := &receiver{t: t, respond: respond, got: make(chan struct{}, 1<<16)}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	if l != nil {
		r.srv.Listener.Close()
		r.srv.Listener = l
	}
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	m := &message{ID: req.Header.Get(HeaderID), Timestamp: req.Header.Get(HeaderTimestamp),
		Signature: req.Header.Get(HeaderSignature), Body: body, At: time.Now(), Status: http.StatusNoContent}
	var parsed struct {
		Events json.RawMessage `json:"events"`
		Cursor string          `json:"cursor"`
		Part   int             `json:"part"`
		More   bool            `json:"more"`
	}
	if err := json.Unmarshal(body, &parsed); err != nil {
		r.t.Errorf("receiver: body is not JSON: %v: %s", err, body)
	}
	json.Unmarshal(parsed.Events, &m.Events)
	m.Cursor, m.Part, m.More = parsed.Cursor, parsed.Part, parsed.More
	if err := Verify(testSecret, req.Header, body, time.Now(), DefaultTolerance); err != nil {
		r.t.Errorf("receiver: signature: %v", err)
	}
	r.mu.Lock()
	r.active++
	r.maxConc = max(r.maxConc, r.active)
	n := len(r.msgs)
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	// m is visible to the test from here on: the callback sets the status
	// on a copy, published under the lock once it has answered.
	c := *m
	if r.respond == nil || !r.respond(n, &c, w) {
		w.WriteHeader(http.StatusNoContent)
	}
	r.mu.Lock()
	m.Status = c.Status
	r.active--
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *receiver) url() string { return r.srv.URL + "/hook" }

func (r *receiver) messages() []*message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*message(nil), r.msgs...)
}

// accepted returns the messages answered 2xx, first per webhook-id.
func (r *receiver) accepted() []*message {
	// Under the lock: a request still being answered sets its status.
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var out []*message
	for _, m := range r.msgs {
		if m.Status >= 200 && m.Status < 300 && !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

// checkRows asserts that msgs, in order, carry rows of transactions
// from..to exactly once and in order.
func checkRows(t *testing.T, msgs []*message, l *fakeLog, from, to int) {
	t.Helper()
	type row struct{ txn, i int }
	var got []row
	for _, m := range msgs {
		for _, e := range m.Events {
			got = append(got, row{e.After.Txn, e.After.I})
		}
	}
	var want []row
	for n := from; n <= to; n++ {
		tx, _ := l.at(n - 1)
		for i := range tx.Events {
			want = append(want, row{n, i})
		}
	}
	if len(got) != len(want) {
		for _, m := range msgs {
			var txns []int
			for _, e := range m.Events {
				txns = append(txns, e.After.Txn)
			}
			t.Logf("message %s status %d at %s: transactions %v", m.ID, m.Status, m.At.Format("15:04:05.000"), txns)
		}
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d: got txn %d row %d, want txn %d row %d", i, got[i].txn, got[i].i, want[i].txn, want[i].i)
		}
	}
}
