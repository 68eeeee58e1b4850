package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
	"github.com/vstream-gateway/vstream-gateway/store/storetest"
)

// TestCluster runs the store on a real Redis Cluster (three primaries,
// three replicas): the conformance suite — every multi-key script and
// command must find its keys in one slot, or Redis refuses it with
// CROSSSLOT — then writes, fenced writes and a lease through a failover
// of the primary that holds the store's slot.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	open := func(t *testing.T, prefix string) store.Store {
		return dial(t, c.URL(), prefix)
	}
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return open(t, redistest.Prefix()) })
	})
	t.Run("Failover", func(t *testing.T) {
		p := redistest.Prefix()
		failoverCheck(t, open(t, p), open(t, p), func() {
			c.Failover(t, "{"+p+"}")
		})
	})
	// The same with writes waiting for a replica: the write and its WAIT
	// go to the slot's primary by name, and follow it when it moves.
	t.Run("FailoverMinReplicas", func(t *testing.T) {
		p := redistest.Prefix()
		url := c.URL() + "?min_replicas=1"
		failoverCheck(t, dial(t, url, p), dial(t, url, p), func() {
			c.Failover(t, "{"+p+"}")
		})
	})
}

// TestSentinel runs the store on a primary and a replica behind three
// Sentinels, with min_replicas=1: the conformance suite, then writes,
// fenced writes and a lease through SENTINEL FAILOVER. Sentinel does not
// stop the old primary's writes before promoting the replica, so without
// min_replicas a write confirmed in that window would be lost; with it,
// such a write is reported as failed (store.ErrUnavailable) instead.
func TestSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	url := s.URL() + "?min_replicas=1&replica_timeout=500ms"
	open := func(t *testing.T, prefix string) store.Store { return dial(t, url, prefix) }
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return open(t, redistest.Prefix()) })
	})
	t.Run("Failover", func(t *testing.T) {
		p := redistest.Prefix()
		failoverCheck(t, open(t, p), open(t, p), func() { s.Failover(t) })
	})
}

func dial(t *testing.T, url, prefix string) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := redisstore.Dial(ctx, []string{url}, redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatalf("Dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// writes is what a writer had confirmed: every value whose write returned
// nil, and the longest time without a confirmed write.
type writes struct {
	mu          sync.Mutex
	appended    map[uint64]string // seq → value of confirmed appends
	lastPut     int               // last value a confirmed Put wrote
	lastTried   int               // last value any Put tried
	lastFenced  int
	unavailable int
	lastOK      time.Time
	longestGap  time.Duration
}

func (w *writes) ok() {
	now := time.Now()
	if !w.lastOK.IsZero() && now.Sub(w.lastOK) > w.longestGap {
		w.longestGap = now.Sub(w.lastOK)
	}
	w.lastOK = now
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.appended)
}

// failoverCheck writes through a on a lease it holds while failover runs,
// then checks that nothing confirmed was lost and that fencing holds: b
// cannot take the lease while a holds it, and once b has it a's fenced
// writes are refused. Every failed call must be store.ErrUnavailable.
func failoverCheck(t *testing.T, a, b store.Store, failover func()) {
	ctx := t.Context()
	la, err := a.AcquireLease(ctx, "L", "a", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w := &writes{appended: map[uint64]string{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad error
	var badOnce sync.Once
	fail := func(what string, err error) {
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			badOnce.Do(func() { bad = fmt.Errorf("%s: %w (want nil or store.ErrUnavailable)", what, err) })
		}
	}
	wg.Go(func() { // a's renewals: the lease must survive the failover
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, err := a.RenewLease(ctx, la, 30*time.Second)
				fail("renew", err)
			}
		}
	})
	wg.Go(func() { // the writer: acks (Put), a log (Append), fenced writes
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := strconv.Itoa(i)
			w.mu.Lock()
			w.lastTried = i
			w.mu.Unlock()
			err := a.Put(ctx, "acks", "sub", []byte(v))
			fail("put", err)
			seq, aerr := a.Append(ctx, "log", []byte(v))
			fail("append", aerr)
			ferr := a.PutFenced(ctx, "fenced", "k", []byte(v), "L", la.Token)
			fail("fenced put", ferr)
			w.mu.Lock()
			if err == nil {
				w.lastPut = i
			}
			if aerr == nil {
				w.appended[seq] = v
			}
			if ferr == nil {
				w.lastFenced = i
			}
			if err == nil && aerr == nil && ferr == nil {
				w.ok()
			} else {
				w.unavailable++
			}
			w.mu.Unlock()
			if err != nil || aerr != nil || ferr != nil {
				time.Sleep(20 * time.Millisecond) // a client's backoff
			}
		}
	})
	redistest.WaitFor(t, 30*time.Second, "writes before the failover", func() bool { return w.count() >= 200 })
	start := time.Now()
	failover()
	t.Logf("failover done in %v", time.Since(start).Round(time.Millisecond))
	before := w.count()
	redistest.WaitFor(t, 30*time.Second, "writes after the failover", func() bool { return w.count() >= before+200 })
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	t.Logf("%d confirmed appends, %d rounds with an unavailable store, longest time without a confirmed write %v",
		len(w.appended), w.unavailable, w.longestGap.Round(time.Millisecond))

	// Nothing confirmed is lost.
	entries, err := b.ReadLog(ctx, "log", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	for _, e := range entries {
		got[e.Seq] = string(e.Value)
	}
	for seq, v := range w.appended {
		if got[seq] != v {
			t.Fatalf("confirmed append %d (%s) lost: log has %q", seq, v, got[seq])
		}
	}
	checkAtLeast(t, b, "acks", "sub", w.lastPut, w.lastTried)
	checkAtLeast(t, b, "fenced", "k", w.lastFenced, w.lastTried)

	// Fencing: the lease is a's, with its token, after the failover.
	if l, err := b.GetLease(ctx, "L"); err != nil || l.Holder != "a" || l.Token != la.Token {
		t.Fatalf("lease after the failover: %+v, %v; want a's, token %d", l, err, la.Token)
	}
	if _, err := b.AcquireLease(ctx, "L", "b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("b acquiring a held lease: %v, want ErrLeaseHeld", err)
	}
	// a stops renewing (its last renewal is short); b takes over; a's
	// late writes are refused.
	if _, err := a.RenewLease(ctx, la, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var lb store.Lease
	redistest.WaitFor(t, 15*time.Second, "b to take the expired lease", func() bool {
		lb, err = b.AcquireLease(ctx, "L", "b", time.Minute)
		return err == nil
	})
	if lb.Token <= la.Token {
		t.Fatalf("b's token %d is not above a's %d", lb.Token, la.Token)
	}
	if err := a.PutFenced(ctx, "fenced", "k", []byte("late"), "L", la.Token); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a's fenced write after b took over: %v, want ErrFenced", err)
	}
	if err := b.PutFenced(ctx, "fenced", "k", []byte("b"), "L", lb.Token); err != nil {
		t.Fatalf("b's fenced write: %v", err)
	}
}

// checkAtLeast checks that key holds a value between the last confirmed
// write and the last tried one (a write reported failed may have landed).
func checkAtLeast(t *testing.T, s store.Store, ns, key string, confirmed, tried int) {
	t.Helper()
	v, err := s.Get(t.Context(), ns, key)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < confirmed || n > tried {
		t.Fatalf("%s/%s = %q after the failover; confirmed up to %d, tried up to %d", ns, key, v, confirmed, tried)
	}
}
