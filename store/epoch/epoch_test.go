package epoch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// replica is one gateway's guard with a hook recording what it was told.
type replica struct {
	g     *Guard
	mu    sync.Mutex
	calls []Loss
	fail  int // fail the hook this many more times
	lost  int // observer: losses
}

func newReplica(t *testing.T, st store.Store) *replica {
	t.Helper()
	r := &replica{}
	g, err := Open(context.Background(), st, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		WithObserver(func(lost, _ bool) {
			if lost {
				r.lost++
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	g.OnLoss("record", func(_ context.Context, l Loss) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			return errors.New("not yet")
		}
		r.calls = append(r.calls, l)
		return nil
	})
	r.g = g
	return r
}

func (r *replica) check(t *testing.T) error {
	t.Helper()
	return r.g.Check(context.Background())
}

func wipe(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	if err := st.Delete(ctx, Namespace, Key); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteLog(ctx, ClockLog); err != nil {
		t.Fatal(err)
	}
}

func TestNoLossNoNoise(t *testing.T) {
	st := openStore(t)
	a, b := newReplica(t, st), newReplica(t, st)
	if a.g.Current().ID != b.g.Current().ID {
		t.Fatalf("replicas in different epochs: %v, %v", a.g.Current(), b.g.Current())
	}
	for range 20 {
		if err := a.check(t); err != nil {
			t.Fatal(err)
		}
		if err := b.check(t); err != nil {
			t.Fatal(err)
		}
	}
	if a.lost+b.lost != 0 || a.g.Err() != nil || !a.g.LostAt().IsZero() {
		t.Fatalf("a loss without one: %d %d %v", a.lost, b.lost, a.g.Err())
	}
}

func TestWiped(t *testing.T) {
	st := openStore(t)
	a, b := newReplica(t, st), newReplica(t, st)
	old := a.g.Current()
	wipe(t, st)
	a.fail = 1
	if err := a.check(t); err == nil {
		t.Fatal("the failing hook did not fail the check")
	}
	if err := a.g.Err(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "not yet") || !strings.Contains(err.Error(), Wiped) {
		t.Fatalf("Err while restoring: %v", err)
	}
	if err := a.check(t); err != nil {
		t.Fatal(err)
	}
	if a.g.Err() != nil {
		t.Fatalf("Err after the hooks succeeded: %v", a.g.Err())
	}
	if len(a.calls) != 1 || a.calls[0].How != Wiped || a.calls[0].Lost.ID != old.ID || a.lost != 1 {
		t.Fatalf("a's hook calls %+v, losses %d", a.calls, a.lost)
	}
	cur := a.g.Current()
	if cur.ID == old.ID || cur.Previous != old.ID || cur.LostAt.IsZero() || cur.How != Wiped {
		t.Fatalf("record after the loss: %+v", cur)
	}
	// The other replica learns it from the record.
	if err := b.check(t); err != nil {
		t.Fatal(err)
	}
	if len(b.calls) != 1 || b.calls[0].How != Wiped || b.g.Current() != cur || b.lost != 1 {
		t.Fatalf("b: calls %+v, current %+v, losses %d", b.calls, b.g.Current(), b.lost)
	}
	// A replica started now knows when data was lost.
	if c := newReplica(t, st); !c.g.LostAt().Equal(cur.LostAt) {
		t.Fatalf("a new replica's LostAt %v, want %v", c.g.LostAt(), cur.LostAt)
	}
	// Later checks find nothing new.
	for range 5 {
		a.check(t)
		b.check(t)
	}
	if len(a.calls)+len(b.calls) != 2 {
		t.Fatalf("hooks ran again: %d, %d", len(a.calls), len(b.calls))
	}
}

// TestReplacedByFreshReplica: after the wipe, a replica starts before the
// running ones noticed, and takes the empty store for a new one.
func TestReplacedByFreshReplica(t *testing.T) {
	st := openStore(t)
	a := newReplica(t, st)
	old := a.g.Current()
	wipe(t, st)
	c := newReplica(t, st)
	if !c.g.LostAt().IsZero() {
		t.Fatal("a fresh start cannot know")
	}
	if err := a.check(t); err != nil {
		t.Fatal(err)
	}
	if len(a.calls) != 1 || a.calls[0].How != Replaced || a.calls[0].Lost.ID != old.ID {
		t.Fatalf("a's hook calls %+v", a.calls)
	}
	if err := c.check(t); err != nil {
		t.Fatal(err)
	}
	if c.g.LostAt().IsZero() || len(c.calls) != 0 {
		t.Fatalf("the fresh replica: LostAt %v, calls %+v", c.g.LostAt(), c.calls)
	}
}

// TestRolledBack: the store went back to older data — the epoch record is
// there, the clock's numbers are lower than this replica already got.
func TestRolledBack(t *testing.T) {
	st := openStore(t)
	a, b := newReplica(t, st), newReplica(t, st)
	for range 3 {
		a.check(t)
		b.check(t)
	}
	old := a.g.Current()
	if err := st.DeleteLog(context.Background(), ClockLog); err != nil { // numbering restarts at 1
		t.Fatal(err)
	}
	if err := b.check(t); err != nil {
		t.Fatal(err)
	}
	if len(b.calls) != 1 || b.calls[0].How != RolledBack || b.calls[0].Lost.ID != old.ID {
		t.Fatalf("b's hook calls %+v", b.calls)
	}
	if err := a.check(t); err != nil {
		t.Fatal(err)
	}
	if len(a.calls) != 1 || a.calls[0].How != RolledBack {
		t.Fatalf("a's hook calls %+v", a.calls)
	}
	for range 5 {
		a.check(t)
		b.check(t)
	}
	if len(a.calls) != 1 || len(b.calls) != 1 || a.g.Current().ID != b.g.Current().ID {
		t.Fatalf("after settling: %d, %d calls; epochs %s, %s", len(a.calls), len(b.calls), a.g.Current().ID, b.g.Current().ID)
	}
}
