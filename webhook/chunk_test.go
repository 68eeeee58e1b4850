package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// partsOf renders messages as "part/events[+cursor][>more]" items, e.g.
// "1/3> 2/3> 3/1+ 0/1+".
func partsOf(msgs []*message) string {
	var out []string
	for _, m := range msgs {
		s := fmt.Sprintf("%d/%d", m.Part, len(m.Events))
		if m.Cursor != "" {
			s += "+"
		}
		if m.More {
			s += ">"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// A transaction delivered in pieces is cut into batches of its own of at
// most batch_max_events, whatever its pieces: numbered parts, "more" and no
// cursor (in the body or its events) on all but the last. The stored cursor
// stays before the transaction until the last part is confirmed; after a
// restart inside it the transaction is read again and cut into the same
// parts with the same webhook-ids, so de-duplicating on the id gives every
// row once.
func TestWebhookCutsChunkedTransactionIntoParts(t *testing.T) {
	e := newEnv(t)
	var refuse atomic.Bool
	refuse.Store(true)
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		if m.Part == 3 && refuse.Load() {
			m.Status = http.StatusServiceUnavailable
			w.WriteHeader(m.Status)
			return true
		}
		return false
	})
	v := e.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 3; c.MaxAttempts = 1000 })
	e.log.addChunked(4, 4, 2) // transaction 2: ten events in three pieces
	e.log.add(1)              // transaction 3

	ctx, cancel := context.WithCancel(context.Background())
	sv := e.svc.NewSupervisor(WithLeaseTTL(5 * time.Second))
	done := make(chan struct{})
	go func() { sv.Run(ctx); close(done) }()
	wait.For(t, "part 3 to be refused twice", 5*time.Second, func() bool {
		n := 0
		for _, m := range r.messages() {
			if m.Part == 3 {
				n++
			}
		}
		return n >= 2
	})
	if n := e.cursorN(v.ID); n != 1 {
		t.Fatalf("stored cursor at %d inside the transaction, want 1, before it", n)
	}
	cancel()
	<-done
	first := r.messages()

	// The gateway restarts: the recorded part 3 is sent again, then the
	// transaction is read again from the cursor before it.
	refuse.Store(false)
	e.supervise()
	wait.For(t, "the cursor past transaction 3", 5*time.Second, func() bool { return e.cursorN(v.ID) == 3 })
	all := r.messages()
	again := all[len(first):]
	if got, want := partsOf(again), "3/3> 1/3> 2/3> 3/3> 4/1+ 0/1+"; got != want {
		t.Fatalf("after the restart: %s, want %s", got, want)
	}
	ids := map[int]string{}
	for _, m := range first {
		ids[m.Part] = m.ID
		if m.More && (m.Cursor != "" || strings.Contains(string(m.Body), `"cursor"`)) {
			t.Errorf("part %d has a cursor: %s", m.Part, m.Body)
		}
	}
	for _, m := range again[1:5] {
		if ids[m.Part] != "" && m.ID != ids[m.Part] {
			t.Errorf("part %d read again has webhook-id %s, was %s", m.Part, m.ID, ids[m.Part])
		}
	}
	if again[0].ID != ids[3] {
		t.Errorf("the recorded part 3 re-sent as %s, was %s", again[0].ID, ids[3])
	}

	// De-duplicated on webhook-id: every row once, in order.
	var rows []string
	for _, m := range r.accepted() {
		for _, ev := range m.Events {
			rows = append(rows, fmt.Sprintf("%d.%d", ev.After.Txn, ev.After.I))
		}
	}
	if got, want := strings.Join(rows, " "), "2.0 2.1 2.2 2.3 2.4 2.5 2.6 2.7 2.8 2.9 3.0"; got != want {
		t.Fatalf("rows %s, want %s", got, want)
	}
}

// batch_max_bytes bounds batches of small whole transactions too: a batch
// ends before a transaction that would take its events past it.
func TestWebhookBatchMaxBytes(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	// Events of about 66 bytes: 15 (five transactions of three) fit in
	// 1,024 bytes, 18 do not.
	v := e.create(r.url(), func(c *CreateRequest) { c.BatchMaxBytes = 1024 })
	if v.BatchMaxBytes != 1024 {
		t.Fatalf("batch_max_bytes %d", v.BatchMaxBytes)
	}
	e.log.addN(20, 3)
	e.supervise()
	wait.For(t, "delivery", 5*time.Second, func() bool { return e.cursorN(v.ID) == 21 })
	msgs := r.accepted()
	checkRows(t, msgs, e.log, 2, 21)
	for _, m := range msgs {
		if len(m.Events) > 15 {
			t.Fatalf("a batch of %d events: past batch_max_bytes", len(m.Events))
		}
	}
}
