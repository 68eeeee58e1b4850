package lease_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/lease"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// eachStore runs f against the Redis store and the embedded one.
func eachStore(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("redis", func(t *testing.T) { f(t, redistest.NewStore(t, redistest.Prefix())) })
	t.Run("bolt", func(t *testing.T) {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"), boltstore.WithNoSync())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Fault modes of a faultStore's lease calls.
const (
	answer int32 = iota // pass through
	fail                // fail at once, like a refused connection
	hang                // never answer until the caller gives up, like a frozen store or a black-holed connection
)

var errOutage = errors.New("store unreachable")

// faultStore is one replica's view of a shared store whose lease calls can
// be made to fail or hang. It records when the last successful acquisition
// or renewal was sent: the store computed the lease's expiry after that.
type faultStore struct {
	store.Store
	mode atomic.Int32

	mu          sync.Mutex
	lastOK      time.Time
	renewOK     int
	renewFailed int
}

func (f *faultStore) fault(ctx context.Context) error {
	switch f.mode.Load() {
	case fail:
		return errOutage
	case hang:
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *faultStore) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	sent := time.Now()
	if err := f.fault(ctx); err != nil {
		return store.Lease{}, err
	}
	l, err := f.Store.AcquireLease(ctx, name, holder, ttl)
	if err == nil {
		f.mu.Lock()
		f.lastOK = sent
		f.mu.Unlock()
	}
	return l, err
}

func (f *faultStore) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	sent := time.Now()
	err := f.fault(ctx)
	if err == nil {
		l, err = f.Store.RenewLease(ctx, l, ttl)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.lastOK = sent
		f.renewOK++
	} else {
		f.renewFailed++
	}
	return l, err
}

func (f *faultStore) ReleaseLease(ctx context.Context, l store.Lease) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	return f.Store.ReleaseLease(ctx, l)
}

// stats returns the send time of the last successful acquisition or
// renewal, and the renewals that succeeded and failed.
func (f *faultStore) stats() (lastOK time.Time, ok, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastOK, f.renewOK, f.renewFailed
}

// timeline records what happened, in order.
type timeline struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	what string
	at   time.Time
}

func (tl *timeline) add(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.events = append(tl.events, event{what, time.Now()})
}

// find returns the position and time of what, or -1.
func (tl *timeline) find(what string) (int, time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i, e := range tl.events {
		if e.what == what {
			return i, e.at
		}
	}
	return -1, time.Time{}
}

func (tl *timeline) has(what string) bool { i, _ := tl.find(what); return i >= 0 }

// before asserts that a and b both happened, a first, and returns their
// times.
func (tl *timeline) before(t *testing.T, a, b string) (time.Time, time.Time) {
	t.Helper()
	i, at := tl.find(a)
	j, bt := tl.find(b)
	if i < 0 || j < 0 || i > j {
		t.Fatalf("want %q before %q, got %v", a, b, tl.events)
	}
	return at, bt
}

// holder runs a Runner in the background until the test ends.
type holder struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // what Run returned, once done is closed
	token  atomic.Uint64
}

// start runs r with work: the work records "<name> acquired", waits for
// its context to end, records "<name> stopped" and returns nil.
func start(t *testing.T, r *lease.Runner, tl *timeline, name string) *holder {
	ctx, cancel := context.WithCancel(context.Background())
	h := &holder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.err = r.Run(ctx, func(ctx context.Context, l store.Lease) error {
			h.token.Store(l.Token)
			tl.add(name + " acquired")
			<-ctx.Done()
			tl.add(name + " stopped")
			return nil
		})
	}()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop ends the holder's Run and returns its error.
func (h *holder) stop(t *testing.T) error {
	t.Helper()
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	return h.err
}

// returned waits for Run to return on its own and returns its error.
func (h *holder) returned(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-h.done:
		return h.err
	case <-time.After(timeout):
		t.Fatal("Run did not return")
		return nil
	}
}

func (e event) String() string { return e.what + " at " + e.at.Format("15:04:05.000") }
