package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers of the fault tests (upstream_faults_test.go): a writer that keeps
// writing through failures, readers that read in the background and time
// every row, and a look at the gateway's metrics.

// steadyWriter inserts one customer per transaction, at a steady rate,
// through vtgate. An insert that fails (vtgate down, the tablet of the
// row's shard down) may still have committed; settle decides from the
// table. Inserts are sequential, so the attempts' order is commit order.
type steadyWriter struct {
	db  *sql.DB
	tag string

	mu       sync.Mutex
	attempts []writeAttempt
	stop     chan struct{}
	done     chan struct{}
}

type writeAttempt struct {
	email string
	ok    bool      // the insert answered success
	at    time.Time // when it answered
}

func newSteadyWriter(t *testing.T, tag string) *steadyWriter {
	db, err := cluster.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &steadyWriter{db: db, tag: tag}
}

// start writes every period until stopWriting.
func (w *steadyWriter) start(ctx context.Context, period time.Duration) {
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				w.insertOne(ctx, "steady")
			}
		}
	}()
}

func (w *steadyWriter) insertOne(ctx context.Context, phase string) bool {
	w.mu.Lock()
	email := fmt.Sprintf("%s-%s-%05d@e2e", w.tag, phase, len(w.attempts)+1)
	w.mu.Unlock()
	ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := w.db.ExecContext(ictx, "insert into customer(email) values (?)", email)
	cancel()
	w.mu.Lock()
	w.attempts = append(w.attempts, writeAttempt{email: email, ok: err == nil, at: time.Now()})
	w.mu.Unlock()
	return err == nil
}

// sentinels inserts n rows after the steady writing, retrying each until
// it succeeds (see readUntil for why the end of a read needs them).
func (w *steadyWriter) sentinels(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for i := 0; i < n; {
		if w.insertOne(ctx, "sentinel") {
			i++
			continue
		}
		select {
		case <-ctx.Done():
			t.Fatal("sentinel rows could not be written")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopWriting ends the steady writing; sentinels and settle follow.
func (w *steadyWriter) stopWriting() {
	close(w.stop)
	<-w.done
}

// settle returns every row that committed, in commit order, and how many
// inserts failed; it asks the table about the failed ones.
func (w *steadyWriter) settle(t *testing.T, ctx context.Context) (rows []string, failed int) {
	t.Helper()
	w.mu.Lock()
	attempts := append([]writeAttempt(nil), w.attempts...)
	w.mu.Unlock()
	var unsure []any
	for _, a := range attempts {
		if !a.ok {
			unsure = append(unsure, a.email)
		}
	}
	committed := map[string]bool{}
	if len(unsure) > 0 {
		q := "select email from customer where email in (?" + strings.Repeat(",?", len(unsure)-1) + ")"
		res, err := w.db.QueryContext(ctx, q, unsure...)
		if err != nil {
			t.Fatalf("settle failed inserts: %v", err)
		}
		for res.Next() {
			var e string
			if err := res.Scan(&e); err != nil {
				t.Fatal(err)
			}
			committed[e] = true
		}
		if err := res.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range attempts {
		if a.ok || committed[a.email] {
			rows = append(rows, a.email)
		}
	}
	if len(committed) > 0 {
		t.Logf("%d inserts answered an error but committed", len(committed))
	}
	return rows, len(unsure) - len(committed)
}

// insertedAt maps every successful insert to when it answered.
func (w *steadyWriter) insertedAt() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[string]time.Time{}
	for _, a := range w.attempts {
		if a.ok {
			m[a.email] = a.at
		}
	}
	return m
}

// okBetween counts the successful inserts that answered in [from, to).
func (w *steadyWriter) okBetween(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.attempts {
		if a.ok && !a.at.Before(from) && a.at.Before(to) {
			n++
		}
	}
	return n
}

// bgReader reads a stream in the background and times every change event.
type bgReader struct {
	name string
	next func(ctx context.Context) (ev, error)
	ack  func(ctx context.Context, cursor string) error // nil: anonymous

	mu      sync.Mutex
	got     []ev
	arrived []time.Time
	err     error // why reading stopped before ctx ended: the reader was dropped
	acked   string
}

func (r *bgReader) run(ctx context.Context) {
	for {
		e, err := r.next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
			return
		}
		if e.Type != "change" {
			continue
		}
		now := time.Now()
		r.mu.Lock()
		r.got = append(r.got, e)
		r.arrived = append(r.arrived, now)
		n := len(r.got)
		r.mu.Unlock()
		// Named readers acknowledge as they go; each row is a transaction.
		if r.ack != nil && n%10 == 0 && e.Cursor != "" {
			if err := r.ack(ctx, e.Cursor); err != nil && ctx.Err() == nil {
				r.mu.Lock()
				r.err = fmt.Errorf("ack: %w", err)
				r.mu.Unlock()
				return
			}
			r.mu.Lock()
			r.acked = e.Cursor
			r.mu.Unlock()
		}
	}
}

// has reports whether every email of want has arrived, or the reader
// stopped.
func (r *bgReader) has(want []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return true
	}
	seen := make(map[string]bool, len(r.got))
	for _, e := range r.got {
		seen[e.str("email")] = true
	}
	for _, e := range want {
		if !seen[e] {
			return false
		}
	}
	return true
}

func (r *bgReader) snapshot() ([]ev, []time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ev(nil), r.got...), append([]time.Time(nil), r.arrived...), r.err
}

// arrivals maps each email to its first arrival.
func (r *bgReader) arrivals() map[string]time.Time {
	got, at, _ := r.snapshot()
	m := map[string]time.Time{}
	for i, e := range got {
		if _, ok := m[e.str("email")]; !ok {
			m[e.str("email")] = at[i]
		}
	}
	return m
}

// rowGaps describes how a reader fared during a fault: the longest time
// without a row between from and to (the row before from counts as its
// start), and the longest a row inserted in that time waited for it.
func rowGaps(arrived map[string]time.Time, inserted map[string]time.Time, from, to time.Time) (gap, latency time.Duration) {
	var times []time.Time
	for _, at := range arrived {
		times = append(times, at)
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var prev time.Time
	for _, at := range times {
		if at.Before(from) {
			prev = at
			continue
		}
		if at.After(to) {
			break
		}
		if !prev.IsZero() {
			gap = max(gap, at.Sub(prev))
		}
		prev = at
	}
	for email, in := range inserted {
		if in.Before(from) || in.After(to) {
			continue
		}
		if at, ok := arrived[email]; ok {
			latency = max(latency, at.Sub(in))
		}
	}
	return gap, latency
}

// pullReader long-polls as an application would: named (subscriber=,
// acking what it processed) or anonymous (cursor=). Every answer must be a
// 200: a 5xx is this transport's way of dropping the reader.
type pullReader struct {
	g                  *gateway
	stream, subscriber string
	cursor             string
	buf                []ev
}

func (p *pullReader) next(ctx context.Context) (ev, error) {
	for len(p.buf) == 0 {
		q := url.Values{"wait": {"2s"}, "limit": {"200"}}
		if p.subscriber != "" {
			q.Set("subscriber", p.subscriber)
		}
		if p.cursor != "" {
			q.Set("cursor", p.cursor)
		}
		req, err := http.NewRequestWithContext(ctx, "GET", p.g.url+"/v1/streams/"+p.stream+"/changes?"+q.Encode(), nil)
		if err != nil {
			return ev{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ev{}, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return ev{}, err
		}
		if resp.StatusCode != http.StatusOK {
			return ev{}, fmt.Errorf("pull: %d %s", resp.StatusCode, b)
		}
		var out struct {
			Events     []json.RawMessage `json:"events"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return ev{}, err
		}
		for _, raw := range out.Events {
			e, err := parseEvent(raw)
			if err != nil {
				return ev{}, err
			}
			p.buf = append(p.buf, e)
		}
		if out.NextCursor != "" {
			p.cursor = out.NextCursor
		}
	}
	e := p.buf[0]
	p.buf = p.buf[1:]
	return e, nil
}

func (p *pullReader) ack(ctx context.Context, cursor string) error {
	var out map[string]any
	status, err := p.g.do(ctx, "POST", "/v1/streams/"+p.stream+"/subscribers/"+p.subscriber+"/ack", map[string]string{"cursor": cursor}, &out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("ack: %d %v", status, out)
	}
	return err
}

// metricSum scrapes the gateway and sums the samples of name whose labels
// contain every one of labels (e.g. `stream="x"`).
func metricSum(t *testing.T, g *gateway, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line[:sp], l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// waitUntil is eventuallyCtx for a condition without a reason: it reports
// whether cond came to hold within d.
func waitUntil(ctx context.Context, d time.Duration, cond func() bool) bool {
	return eventuallyCtx(ctx, d, "condition", func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

var errNotYet = errors.New("not yet")

// faultRun is what every fault test sets up before its fault: a gateway
// (with the webhook test flags and the given ones), a stream on customer,
// readers on every transport and a webhook from the stream's first
// position, a writer at 20 rows/s, and rows seen by every reader.
type faultRun struct {
	g      *gateway
	stream string
	f      *faultReaders
	w      *steadyWriter
	// upstreamFailed is the WebSocket upstream_failed count at the start.
	upstreamFailed float64
	stopReaders    context.CancelFunc
}

func startFaultRun(t *testing.T, ctx context.Context, prefix string, flags ...string) *faultRun {
	t.Helper()
	g := startGateway(t, whGatewayFlags(t, append([]string{"--max-conns-per-token", "0"}, flags...)...)...)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	r := &faultRun{g: g, stream: prefix + "-" + suffix}
	g.createStream(t, map[string]any{"name": r.stream, "keyspace": "customer", "tables": []string{"customer"}})
	start := initialCursor(t, ctx, g, r.stream)
	r.upstreamFailed = wsDisconnects(t, g, "upstream_failed")
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	r.stopReaders = stop
	r.f = startFaultReaders(t, rctx, g, r.stream, start)
	r.w = newSteadyWriter(t, prefix+suffix)
	r.w.start(ctx, 50*time.Millisecond)
	r.f.waitRowsAfter(t, ctx, r.w, time.Time{}, 20, "before the fault")
	return r
}

// finish stops the writer, writes the sentinels, waits until every reader
// has every row written, stops the readers and checks each got every row
// exactly once, in order per shard. It returns the rows written.
func (r *faultRun) finish(t *testing.T, ctx context.Context, during string) []string {
	t.Helper()
	r.w.stopWriting()
	r.w.sentinels(t, ctx, sentinels)
	want, failed := r.w.settle(t, ctx)
	r.f.waitAll(t, ctx, "at the end", want)
	r.stopReaders()
	if during != "" {
		during = " " + during
	}
	t.Logf("%d rows written (%d inserts failed%s)", len(want), failed, during)
	r.f.check(t, ctx, r.g, r.stream, want)
	return want
}

// noneClosedUpstreamFailed checks that no WebSocket was closed as
// upstream_failed since the start: a fault the gateway rides out is not
// a reader's failure.
func (r *faultRun) noneClosedUpstreamFailed(t *testing.T) {
	t.Helper()
	if n := wsDisconnects(t, r.g, "upstream_failed") - r.upstreamFailed; n != 0 {
		t.Errorf("%v WebSockets closed as upstream_failed", n)
	}
}
