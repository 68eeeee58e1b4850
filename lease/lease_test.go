package lease_test

import (
	"context"
	"errors"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/lease"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// contender is another replica waiting for the lease on the shared store;
// it retries fast, so that any moment the lease is free would be seized.
func contender(t *testing.T, st store.Store, ttl time.Duration, tl *timeline) *holder {
	return start(t, lease.New(st, "L", "b", ttl, lease.WithLogger(quiet), lease.WithRetry(5*time.Millisecond, 20*time.Millisecond)), tl, "b")
}

// A store outage shorter than the lease does not interrupt the work, and
// the lease is never free in between: the contender never gets it.
func TestOutageShorterThanLease(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		const ttl = 1500 * time.Millisecond
		fa := &faultStore{Store: st}
		tl := &timeline{}
		a := start(t, lease.New(fa, "L", "a", ttl, lease.WithLogger(quiet)), tl, "a")
		wait.For(t, "a to acquire", 5*time.Second, func() bool { return tl.has("a acquired") })
		b := contender(t, st, ttl, tl)

		fa.mode.Store(fail)
		outage := time.Now()
		wait.For(t, "two failed renewals", 5*time.Second, func() bool { _, _, failed := fa.stats(); return failed >= 2 })
		fa.mode.Store(answer)
		_, before, _ := fa.stats()
		if d := time.Since(outage); d >= ttl-ttl/4 {
			t.Fatalf("the outage lasted %v, not shorter than the lease (%v) minus the margin", d, ttl)
		}
		// Renewals resume, and go on for longer than the lease time.
		wait.For(t, "three renewals after the outage", 5*time.Second, func() bool { _, ok, _ := fa.stats(); return ok >= before+3 })
		if tl.has("a stopped") || tl.has("b acquired") {
			t.Fatalf("the outage interrupted the holder: %v", tl.events)
		}
		l, err := st.GetLease(context.Background(), "L")
		if err != nil || l.Holder != "a" || l.Token != a.token.Load() {
			t.Fatalf("lease after the outage: %+v, %v; want a's, token %d", l, err, a.token.Load())
		}

		if err := a.stop(t); err != nil {
			t.Fatalf("Run of a stopped holder: %v", err)
		}
		wait.For(t, "b to take over", ttl/2, func() bool { return tl.has("b acquired") })
		tl.before(t, "a stopped", "b acquired")
		if b.token.Load() <= a.token.Load() {
			t.Fatalf("b's token %d is not newer than a's %d", b.token.Load(), a.token.Load())
		}
	})
}

// When the store stays unreachable (lease calls fail) or stops answering
// (they hang, as for a frozen store or a black-holed connection), the
// holder stops its work at its local deadline, before the lease expires
// in the store, and the contender takes over only after that expiry.
func TestOutageLongerThanLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode int32
	}{{"failing", fail}, {"hanging", hang}} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st store.Store) {
				const ttl = time.Second
				const margin = ttl / 4 // the default
				fa := &faultStore{Store: st}
				tl := &timeline{}
				a := start(t, lease.New(fa, "L", "a", ttl, lease.WithLogger(quiet)), tl, "a")
				wait.For(t, "a to acquire", 5*time.Second, func() bool { return tl.has("a acquired") })
				contender(t, st, ttl, tl)
				fa.mode.Store(tc.mode)

				wait.For(t, "b to take over", 5*time.Second, func() bool { return tl.has("b acquired") })
				stopped, took := tl.before(t, "a stopped", "b acquired")
				// The store computed the expiry after receiving a's last
				// successful request: nobody could get the lease before
				// last+ttl, and a stopped at its deadline, last+ttl-margin.
				last, _, _ := fa.stats()
				if d := stopped.Sub(last); d < ttl-margin-5*time.Millisecond || d >= ttl {
					t.Errorf("a stopped %v after its last renewal; want at its deadline, %v, and before the ttl %v", d, ttl-margin, ttl)
				}
				if d := took.Sub(last); d < ttl-5*time.Millisecond || d > ttl+ttl/2 {
					t.Errorf("b took over %v after a's last renewal; want just after the ttl %v", d, ttl)
				}

				err := a.returned(t, 5*time.Second)
				var lost *lease.LostError
				if !errors.As(err, &lost) || !errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrExpired) {
					t.Fatalf("Run = %v, want a LostError for an expiry", err)
				}
				if lost.Token != a.token.Load() || lost.Name != "L" || lost.Holder != "a" {
					t.Fatalf("LostError = %+v, want lease L of a, token %d", lost, a.token.Load())
				}
				if tc.mode == fail && !errors.Is(err, errOutage) {
					t.Fatalf("Run = %v, want the last renewal error in the chain", err)
				}
			})
		})
	}
}

// A holder whose lease is revoked in the store stops at its next renewal,
// without waiting for its deadline.
func TestRevokedLeaseStopsAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		const ttl = 1500 * time.Millisecond
		tl := &timeline{}
		a := start(t, lease.New(st, "L", "a", ttl, lease.WithLogger(quiet)), tl, "a")
		wait.For(t, "a to acquire", 5*time.Second, func() bool { return tl.has("a acquired") })
		ctx := context.Background()
		l, err := st.GetLease(ctx, "L")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ReleaseLease(ctx, l); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		err = a.returned(t, 5*time.Second)
		if !errors.Is(err, lease.ErrLost) || !errors.Is(err, store.ErrLeaseLost) || errors.Is(err, lease.ErrExpired) {
			t.Fatalf("Run = %v, want a LostError from the store", err)
		}
		_, stopped := tl.find("a stopped")
		if d := stopped.Sub(revoked); d > ttl/2 {
			t.Fatalf("a stopped %v after the revocation; want at the next renewal, within %v", d, ttl/3)
		}
	})
}

// A holder that shuts down releases the lease: the contender takes over
// at once, not after the lease time.
func TestReleaseHandsOver(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		const ttl = 5 * time.Second
		tl := &timeline{}
		a := start(t, lease.New(st, "L", "a", ttl, lease.WithLogger(quiet)), tl, "a")
		wait.For(t, "a to acquire", 5*time.Second, func() bool { return tl.has("a acquired") })
		contender(t, st, ttl, tl)
		if err := a.stop(t); err != nil {
			t.Fatalf("Run of a stopped holder: %v", err)
		}
		wait.For(t, "b to take over", ttl/2, func() bool { return tl.has("b acquired") })
		stopped, took := tl.before(t, "a stopped", "b acquired")
		if d := took.Sub(stopped); d > ttl/20 {
			t.Fatalf("handover took %v with a %v lease", d, ttl)
		}
	})
}

// The work gets the fencing token: its writes land while it holds the
// lease, and are refused once another holder has taken it.
func TestWorkFencesWithToken(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		var first store.Lease
		err := lease.New(st, "L", "a", time.Minute, lease.WithLogger(quiet)).Run(ctx, func(ctx context.Context, l store.Lease) error {
			first = l
			return st.PutFenced(ctx, "ns", "k", []byte("a"), l.Name, l.Token)
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		errDone := errors.New("done")
		err = lease.New(st, "L", "b", time.Minute, lease.WithLogger(quiet)).Run(ctx, func(ctx context.Context, l store.Lease) error {
			if l.Token <= first.Token {
				t.Errorf("second token %d, first %d", l.Token, first.Token)
			}
			if err := st.PutFenced(ctx, "ns", "k", []byte("stale"), first.Name, first.Token); !errors.Is(err, store.ErrFenced) {
				t.Errorf("write with the former holder's token: %v", err)
			}
			return errDone
		})
		if !errors.Is(err, errDone) {
			t.Fatalf("Run = %v, want the work's error", err)
		}
		if v, _ := st.Get(ctx, "ns", "k"); string(v) != "a" {
			t.Fatalf("value %q", v)
		}
	})
}

// Run gives up waiting for a held lease when its context ends, without
// running the work.
func TestRunCancelledWhileWaiting(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		if _, err := st.AcquireLease(context.Background(), "L", "other", time.Minute); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := lease.New(st, "L", "a", time.Second, lease.WithLogger(quiet)).Run(ctx, func(context.Context, store.Lease) error {
			t.Error("the work ran without the lease")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want the context's error", err)
		}
	})
}

func TestRunRejectsBadSettings(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		for _, r := range []*lease.Runner{
			lease.New(st, "", "a", time.Second),
			lease.New(st, "L", "a", time.Millisecond),
			lease.New(st, "L", "a", time.Second, lease.WithSafetyMargin(time.Second/2)),
			lease.New(st, "L", "a", time.Second, lease.WithRetry(time.Second, time.Millisecond)),
		} {
			err := r.Run(context.Background(), func(context.Context, store.Lease) error {
				t.Error("the work ran")
				return nil
			})
			if err == nil {
				t.Error("Run accepted bad settings")
			}
		}
	})
}
