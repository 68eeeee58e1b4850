package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// logRecorder keeps the messages logged through it.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }
func (r *logRecorder) logged(part string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}

// DESIGN §4.1 rule 5, §7: two replicas on one store both find a MoveTables
// cutover; exactly one captures the subscriber behind it (one VStream, one
// spool), the other waits for the cutover's lease and, holding it, finds
// the cutover bridged.
func TestMoveBridgeLeased(t *testing.T) {
	fm := &fakeMover{moves: []streams.Move{moveOfT()}}
	recA, recB := &logRecorder{}, &logRecorder{}
	// The capture waits for the test, not for a stall.
	e := moveEnv(t, fm, WithLogger(slog.New(recA)), WithHolder("replica-a"), WithMoveLease(2*time.Second), WithStall(time.Minute))
	j := e.recordMoveJournal(t)
	e.def.Moves[0].Journal = j.Key // the stream followed this cutover
	e.ack(t, "alice", two(10, 10))

	// Replica b: a hub and a bridger of its own on the same store.
	b := e.bridger(t, e.hubWith(t), WithLogger(slog.New(recB)), WithHolder("replica-b"), WithMoveLease(2*time.Second),
		WithStall(time.Minute))

	defs := []*streams.Definition{e.def}
	e.br.Moved(defs, j)
	first := e.fake.Call(t, 0) // replica a captures; the call waits for the test
	b.Moved(defs, j)
	// Replica b must wait for the lease, never open a capture of its own.
	if err := wait.Until(context.Background(), "replica b waiting for the cutover's lease", 30*time.Second, time.Millisecond, func() error {
		if n := e.fake.Calls(); n > 1 {
			return wait.Abort(fmt.Errorf("%d captures of one subscriber, want 1", n))
		}
		if !recB.logged("waiting for it") {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first.Answer(t, fakevtgate.Script{Batches: [][]*binlogdatapb.VEvent{
		sLo.Txn(100, two(11, 10), field(sLo), row(sLo, "1")),
		sLo.Txn(100, two(20, 10), row(sLo, "2")),
		sLo.Txn(100, two(21, 10), row(sLo, "3")), // a copy
		sHi.Txn(100, two(21, 11), field(sHi), row(sHi, "4")),
		sHi.Txn(100, two(21, 20), row(sHi, "5")),
	}, Open: true})
	// b takes the lease once a is done, and stops: the cutover is bridged.
	wait.For(t, "replica b to take and give back the lease", 30*time.Second, func() bool {
		return recB.logged("lease released")
	})
	if n := e.fake.Calls(); n != 1 {
		t.Fatalf("%d captures, want 1", n)
	}
	ctx := context.Background()
	if done, err := e.br.moveBridged(ctx, j); err != nil || !done {
		t.Fatalf("cutover marked bridged: %v, %v", done, err)
	}
	sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 1 {
		t.Fatalf("alice: %+v, %v", sub, err)
	}
	if got := spooled(t, e, sub.Bridges[0].Log); len(got) != 4 {
		t.Fatalf("spool holds %d transactions, want 4", len(got))
	}
	// A replica that finds the cutover later does not even ask for the lease.
	recC := &logRecorder{}
	c := e.bridger(t, e.hubWith(t), WithLogger(slog.New(recC)), WithHolder("replica-c"))
	c.movedLeased(ctx, defs, j)
	c.Close()
	if recC.logged("lease acquired") || e.fake.Calls() != 1 {
		t.Fatalf("a replica finding a bridged cutover took the lease or captured (%d calls)", e.fake.Calls())
	}
}
