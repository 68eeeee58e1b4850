package webhook

import (
	"context"
	"errors"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/store"
)

func TestDeliverBatchesInOrder(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	v := e.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 5 })
	if e.cursorN(v.ID) != 1 {
		t.Fatalf("created at position %d, want the current one (1)", e.cursorN(v.ID))
	}
	for i := range 30 {
		e.log.add(i % 4) // 0..3 rows: position-only transactions too
	}
	e.supervise()
	last := e.log.len()
	wait.For(t, "the cursor to reach the end", 5*time.Second, func() bool { return e.cursorN(v.ID) == last })
	msgs := r.messages()
	checkRows(t, msgs, e.log, 2, last)
	seen := map[string]bool{}
	for _, m := range msgs {
		if n := len(m.Events); n == 0 || n > 5 {
			t.Errorf("batch %s has %d events", m.ID, n)
		}
		if seen[m.ID] || !strings.HasPrefix(m.ID, "msg_") {
			t.Errorf("webhook-id %q repeated or malformed", m.ID)
		}
		seen[m.ID] = true
	}
	// The body's cursor is the position after the batch's last transaction.
	if c := msgs[len(msgs)-1].Cursor; c == "" {
		t.Error("no cursor in the last body")
	}
	if r.maxConc != 1 {
		t.Errorf("%d concurrent requests, want 1", r.maxConc)
	}
}

// A transaction larger than batch_max_events is sent whole, alone.
func TestDeliverNeverSplitsTransactions(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	v := e.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 3 })
	e.log.add(2)
	e.log.add(7)
	e.log.add(1)
	e.supervise()
	wait.For(t, "delivery", 5*time.Second, func() bool { return e.cursorN(v.ID) == 4 })
	checkRows(t, r.accepted(), e.log, 2, 4)
	for _, m := range r.messages() {
		txns := map[int]bool{}
		for _, ev := range m.Events {
			txns[ev.After.Txn] = true
		}
		if len(m.Events) > 3 && len(txns) > 1 {
			t.Errorf("batch of %d events mixes a large transaction with others", len(m.Events))
		}
	}
}

// Retryable failures keep the batch (same webhook-id, same body, fresh
// timestamp) and honour Retry-After in seconds and as an HTTP-date.
func TestRetriesKeepIDAndHonourRetryAfter(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		switch n {
		case 0:
			m.Status = 500
		case 1:
			w.Header().Set("Retry-After", "3")
			m.Status = 429
		case 2:
			w.Header().Set("Retry-After", time.Now().Add(5*time.Second).UTC().Format(http.TimeFormat))
			m.Status = 503
		case 3:
			m.Status = 408
		default:
			return false
		}
		w.WriteHeader(m.Status)
		w.Write([]byte("busy"))
		return true
	})
	v := e.create(r.url(), nil)
	e.log.addN(3, 2)
	e.supervise()
	wait.For(t, "delivery", 5*time.Second, func() bool { return e.cursorN(v.ID) == 4 })
	msgs := r.messages()
	if len(msgs) != 5 {
		t.Fatalf("%d requests, want 5", len(msgs))
	}
	for _, m := range msgs[1:] {
		if m.ID != msgs[0].ID || string(m.Body) != string(msgs[0].Body) {
			t.Fatalf("a retry changed the message: %s vs %s", m.ID, msgs[0].ID)
		}
	}
	checkRows(t, msgs[4:], e.log, 2, 4)
	d := e.delays.all()
	if len(d) != 4 {
		t.Fatalf("delays %v", d)
	}
	if d[0] < 5*time.Millisecond || d[0] > 16*time.Millisecond {
		t.Errorf("first delay %v is not the backoff's first step", d[0])
	}
	if d[1] != 3*time.Second {
		t.Errorf("Retry-After: 3 gave %v", d[1])
	}
	if d[2] < 3*time.Second || d[2] > 5*time.Second {
		t.Errorf("Retry-After date 5s ahead gave %v", d[2])
	}
	// Once delivered, the view shows no pending batch.
	v, err := e.svc.Get(context.Background(), testDef.Name, v.ID)
	if err != nil || v.Pending != nil {
		t.Fatalf("after delivery: pending %+v, err %v", v.Pending, err)
	}
}

func TestPendingShowsFailures(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		m.Status = 503
		w.WriteHeader(503)
		w.Write([]byte("down for maintenance"))
		return true
	})
	v := e.create(r.url(), nil)
	e.log.add(1)
	e.supervise()
	wait.For(t, "three attempts", 5*time.Second, func() bool { return len(r.messages()) >= 3 })
	var got *View
	wait.For(t, "the pending batch in the view", 5*time.Second, func() bool {
		got, _ = e.svc.Get(context.Background(), testDef.Name, v.ID)
		return got.Pending != nil && got.Pending.Attempts >= 3
	})
	p := got.Pending
	if p.ID != r.messages()[0].ID || p.Events != 1 || p.LastStatus != 503 || !strings.Contains(p.LastError, "down for maintenance") || p.NextAttemptAt.IsZero() {
		t.Fatalf("pending %+v", p)
	}
	if got.Owner == "" {
		t.Error("no owner while delivering")
	}
}

func TestTimeoutsAndRefusedConnectionsAreRetried(t *testing.T) {
	// A port nothing listens on, until the receiver starts there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	m := NewMetrics()
	e := newEnv(t, WithMetrics(m))
	v := e.create("http://"+addr+"/hook", func(c *CreateRequest) { d := Duration(100 * time.Millisecond); c.Timeout = &d })
	e.log.addN(2, 1)
	e.supervise()
	wait.For(t, "refused connections", 5*time.Second, func() bool {
		return counterValue(m.failures.WithLabelValues(v.ID, "connect")) >= 2
	})
	slow := make(chan struct{})
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	r := newReceiverOn(t, l2, func(n int, msg *message, w http.ResponseWriter) bool {
		if n == 0 {
			<-slow // longer than the 100ms timeout
			msg.Status = 0
		}
		return false
	})
	wait.For(t, "a timeout", 5*time.Second, func() bool {
		return counterValue(m.failures.WithLabelValues(v.ID, "timeout")) >= 1
	})
	close(slow)
	wait.For(t, "delivery", 5*time.Second, func() bool { return e.cursorN(v.ID) == 3 })
	checkRows(t, r.accepted()[len(r.accepted())-1:], e.log, 2, 3)
}

func TestPermanentFailureIsDeadLetteredAndReplayed(t *testing.T) {
	e := newEnv(t)
	var fixed atomic.Bool
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		if !fixed.Load() && len(m.Events) > 0 && m.Events[0].After.Txn == 3 {
			m.Status = 400
			w.WriteHeader(400)
			w.Write([]byte(`{"error":"cannot parse"}`))
			return true
		}
		return false
	})
	v := e.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 1; c.MaxAttempts = 5 })
	e.log.addN(5, 1)
	e.supervise()
	wait.For(t, "delivery past the bad batch", 5*time.Second, func() bool { return e.cursorN(v.ID) == 6 })
	var rows []int
	for _, m := range r.accepted() {
		rows = append(rows, m.Events[0].After.Txn)
	}
	if want := []int{2, 4, 5, 6}; !equalInts(rows, want) {
		t.Fatalf("delivered transactions %v, want %v", rows, want)
	}
	ctx := context.Background()
	dls, next, err := e.svc.DeadLetters(ctx, testDef.Name, v.ID, 0, 10)
	if err != nil || len(dls) != 1 || next != 0 {
		t.Fatalf("dead letters %v next %d err %v", dls, next, err)
	}
	dl := dls[0]
	if dl.Reason != ReasonPermanent || dl.Attempts != 1 || dl.LastStatus != 400 || !strings.Contains(dl.LastError, "cannot parse") || dl.Events != 1 {
		t.Fatalf("dead letter %+v", dl)
	}
	if got, _ := e.svc.Get(ctx, testDef.Name, v.ID); got.DeadLetters != 1 {
		t.Fatalf("view shows %d dead letters", got.DeadLetters)
	}
	// A replay the receiver still refuses leaves it as it was.
	if _, err := e.svc.Replay(ctx, testDef.Name, v.ID, dl.Seq); !errors.As(err, new(*ReplayError)) {
		t.Fatalf("refused replay: %v", err)
	}
	fixed.Store(true)
	rp, err := e.svc.Replay(ctx, testDef.Name, v.ID, dl.Seq)
	if err != nil || rp.Replayed == nil {
		t.Fatalf("replay: %+v %v", rp, err)
	}
	last := r.messages()[len(r.messages())-1]
	if last.ID != dl.ID || len(last.Events) != 1 || last.Events[0].After.Txn != 3 {
		t.Fatalf("replayed message %s with %v", last.ID, last.Events)
	}
	dls, _, _ = e.svc.DeadLetters(ctx, testDef.Name, v.ID, 0, 10)
	if dls[0].Replayed == nil {
		t.Fatal("dead letter not marked replayed")
	}
	if _, err := e.svc.Replay(ctx, testDef.Name, v.ID, 99); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("replay of a missing dead letter: %v", err)
	}
	if err := e.svc.PurgeDeadLetters(ctx, testDef.Name, v.ID); err != nil {
		t.Fatal(err)
	}
	if dls, _, _ := e.svc.DeadLetters(ctx, testDef.Name, v.ID, 0, 10); len(dls) != 0 {
		t.Fatalf("%d dead letters after purge", len(dls))
	}
}

func TestMaxAttemptsDeadLetters(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		if len(m.Events) > 0 && m.Events[0].After.Txn == 2 {
			m.Status = 502
			w.WriteHeader(502)
			return true
		}
		return false
	})
	v := e.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 1; c.MaxAttempts = 3 })
	e.log.addN(3, 1)
	e.supervise()
	wait.For(t, "delivery past the failing batch", 5*time.Second, func() bool { return e.cursorN(v.ID) == 4 })
	dls, _, err := e.svc.DeadLetters(context.Background(), testDef.Name, v.ID, 0, 10)
	if err != nil || len(dls) != 1 || dls[0].Reason != ReasonMaxAttempts || dls[0].Attempts != 3 || dls[0].LastStatus != 502 {
		t.Fatalf("dead letters %+v %v", dls, err)
	}
	if n := len(r.messages()); n != 5 {
		t.Fatalf("%d requests, want 3 attempts + 2 later batches", n)
	}
}

func TestGoneDisablesUntilResumed(t *testing.T) {
	e := newEnv(t)
	var gone atomic.Bool
	gone.Store(true)
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		if gone.Load() {
			m.Status = 410
			w.WriteHeader(410)
			return true
		}
		return false
	})
	v := e.create(r.url(), nil)
	e.log.addN(2, 1)
	sv := e.supervise(WithScanInterval(10 * time.Millisecond))
	ctx := context.Background()
	wait.For(t, "the webhook to be disabled", 5*time.Second, func() bool {
		got, _ := e.svc.Get(ctx, testDef.Name, v.ID)
		return got.State == StateDisabled && len(sv.Delivering()) == 0
	})
	time.Sleep(50 * time.Millisecond) // several scans: it must stay disabled
	if n := len(r.messages()); n != 1 {
		t.Fatalf("%d requests to a gone receiver, want 1", n)
	}
	if e.cursorN(v.ID) != 1 {
		t.Fatal("the cursor moved past an undelivered batch")
	}
	got, _ := e.svc.Get(ctx, testDef.Name, v.ID)
	if !strings.Contains(got.DisabledReason, "410") {
		t.Fatalf("reason %q", got.DisabledReason)
	}
	gone.Store(false)
	if got, err := e.svc.Resume(ctx, testDef.Name, v.ID); err != nil || got.State != StateActive {
		t.Fatalf("resume: %+v %v", got, err)
	}
	wait.For(t, "delivery after resume", 5*time.Second, func() bool { return e.cursorN(v.ID) == 3 })
	msgs := r.messages()
	if msgs[1].ID != msgs[0].ID {
		t.Fatal("the batch refused with 410 came back under another id")
	}
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	v := e.create(r.url(), nil)
	sv := e.supervise(WithScanInterval(10 * time.Millisecond))
	ctx := context.Background()
	wait.For(t, "the lease", 5*time.Second, func() bool { return len(sv.Delivering()) == 1 })
	got, err := e.svc.Pause(ctx, testDef.Name, v.ID)
	if err != nil || got.State != StatePaused {
		t.Fatalf("pause: %+v %v", got, err)
	}
	wait.For(t, "the deliverer to stop", 5*time.Second, func() bool { return len(sv.Delivering()) == 0 })
	e.log.addN(3, 1)
	time.Sleep(50 * time.Millisecond)
	if len(r.messages()) != 0 {
		t.Fatal("a paused webhook delivered")
	}
	if _, err := e.svc.Resume(ctx, testDef.Name, v.ID); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "delivery after resume", 5*time.Second, func() bool { return e.cursorN(v.ID) == 4 })
	checkRows(t, r.accepted(), e.log, 2, 4)
}

func TestDeleteStopsAndForgets(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		m.Status = 500
		w.WriteHeader(500)
		return true
	})
	v := e.create(r.url(), func(c *CreateRequest) { c.MaxAttempts = 1 })
	e.log.addN(2, 1)
	sv := e.supervise(WithScanInterval(10 * time.Millisecond))
	ctx := context.Background()
	wait.For(t, "dead letters", 5*time.Second, func() bool { return e.cursorN(v.ID) == 3 })
	if err := e.svc.Delete(ctx, testDef.Name, v.ID); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the deliverer to stop", 5*time.Second, func() bool { return len(sv.Delivering()) == 0 })
	if _, err := e.svc.Get(ctx, testDef.Name, v.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if e.cursorN(v.ID) != 0 {
		t.Fatal("cursor left behind")
	}
	if n, _ := e.st.LogLen(ctx, dlqLog(v.ID)); n != 0 {
		t.Fatal("dead letters left behind")
	}
	if err := e.svc.Delete(ctx, testDef.Name, v.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// An idle webhook (the filter drops every row) still stores its moving
// position.
func TestIdleWebhookStoresPosition(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	v := e.create(r.url(), nil)
	e.log.addN(5, 0)
	e.supervise()
	wait.For(t, "the idle position", 5*time.Second, func() bool { return e.cursorN(v.ID) == 6 })
	if len(r.messages()) != 0 {
		t.Fatal("an empty batch was sent")
	}
}

func TestRotatedSecretSignsAlongside(t *testing.T) {
	e := newEnv(t)
	var sigs atomic.Value
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		sigs.Store(m)
		return false
	})
	v := e.create(r.url(), nil)
	ctx := context.Background()
	rot, err := e.svc.RotateSecret(ctx, testDef.Name, v.ID, &RotateRequest{})
	if err != nil || !strings.HasPrefix(rot.Secret, "whsec_") || rot.PreviousSecretsExpireAt.IsZero() {
		t.Fatalf("rotate: %+v %v", rot, err)
	}
	e.supervise()
	e.log.add(1)
	wait.For(t, "delivery", 5*time.Second, func() bool { return e.cursorN(v.ID) == 2 })
	m := sigs.Load().(*message)
	h := http.Header{}
	h.Set(HeaderID, m.ID)
	h.Set(HeaderTimestamp, m.Timestamp)
	h.Set(HeaderSignature, m.Signature)
	if len(strings.Fields(m.Signature)) != 2 {
		t.Fatalf("signature header %q, want two signatures", m.Signature)
	}
	if err := Verify(rot.Secret, h, m.Body, time.Now(), DefaultTolerance); err != nil {
		t.Fatalf("new secret: %v", err)
	}
	// Rotating with no grace retires the old secrets at once.
	zero := Duration(0)
	rot2, err := e.svc.RotateSecret(ctx, testDef.Name, v.ID, &RotateRequest{Grace: &zero})
	if err != nil || !rot2.PreviousSecretsExpireAt.IsZero() {
		t.Fatalf("rotate without grace: %+v %v", rot2, err)
	}
	w, _ := e.svc.repo.get(ctx, v.ID)
	if len(w.Secrets) != 1 || w.Secrets[0].Secret != rot2.Secret {
		t.Fatalf("secrets %+v", w.Secrets)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A former holder that lost its lease can neither move the cursor nor
// record anything for the webhook: every write is fenced.
func TestStaleHolderIsFenced(t *testing.T) {
	e := newEnv(t)
	v := e.create("http://127.0.0.1:1/hook", nil)
	ctx := context.Background()
	w, _ := e.svc.repo.get(ctx, v.ID)
	old, err := e.st.AcquireLease(ctx, leaseName(v.ID), "a", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stale := newDeliverer(e.svc, testDef, w, old)
	wait.For(t, "expiry", time.Second, func() bool {
		_, err := e.st.AcquireLease(ctx, leaseName(v.ID), "b", time.Minute)
		return err == nil
	})
	if err := stale.ack(ctx, fakePos(1)); !errors.Is(err, errStopped) || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale ack: %v", err)
	}
	if err := stale.putInflight(ctx, &inflight{ID: "msg_x"}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale in-flight write: %v", err)
	}
	if err := stale.disable(ctx, &attempt{status: 410}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale disable: %v", err)
	}
	b := &batch{id: "msg_x", events: 1, cursor: "tok-1", body: []byte(`{}`)}
	if err := e.svc.appendDeadLetter(ctx, w, b, &inflight{ID: "msg_x"}, ReasonPermanent, old); !errors.Is(err, errStopped) || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale dead letter: %v", err)
	}
	if n, _ := e.st.LogLen(ctx, dlqLog(v.ID)); n != 0 {
		t.Fatalf("a stale holder added %d dead letters", n)
	}
	st, _ := hub.NewCursors(e.st).Get(ctx, testDef.Name, SubscriberName(v.ID))
	if posN(st.VGtid) != 1 {
		t.Fatalf("cursor moved to %d", posN(st.VGtid))
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}
