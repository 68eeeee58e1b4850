package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

func acquire(t *testing.T, s store.Store, name, holder string, ttl time.Duration) store.Lease {
	t.Helper()
	l, err := s.AcquireLease(ctxT(t), name, holder, ttl)
	must(t, err, fmt.Sprintf("AcquireLease(%q, %q)", name, holder))
	if l.Name != name || l.Holder != holder || l.Token == 0 || l.Expires.IsZero() {
		t.Fatalf("AcquireLease returned %+v", l)
	}
	return l
}

// takeOver polls until holder acquires name, which must only fail with
// ErrLeaseHeld while the previous lease runs out.
func takeOver(t *testing.T, s store.Store, name, holder string, ttl time.Duration) store.Lease {
	t.Helper()
	var l store.Lease
	waitFor(t, holder+" to take over "+name, func() bool {
		var err error
		l, err = s.AcquireLease(ctxT(t), name, holder, ttl)
		if err != nil && !errors.Is(err, store.ErrLeaseHeld) {
			t.Fatalf("AcquireLease while waiting for expiry: %v", err)
		}
		return err == nil
	})
	return l
}

// waitExpired polls until the store itself considers l expired, observed
// through PutFenced being refused. Writes that land before are fine.
func waitExpired(t *testing.T, s store.Store, l store.Lease) {
	t.Helper()
	waitFor(t, "lease "+l.Name+" to expire", func() bool {
		err := s.PutFenced(ctxT(t), "probe", "k", []byte("probe"), l.Name, l.Token)
		if err != nil && !errors.Is(err, store.ErrFenced) {
			t.Fatalf("PutFenced while waiting for expiry: %v", err)
		}
		return err != nil
	})
}

func sameLease(t *testing.T, got, want store.Lease, what string) {
	t.Helper()
	if got.Name != want.Name || got.Holder != want.Holder || got.Token != want.Token || !got.Expires.Equal(want.Expires) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
}

var leaseTests = []test{
	{"AcquireGet", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		_, err := s.GetLease(ctx, "L")
		wantErr(t, err, store.ErrNotFound, "GetLease before acquire")
		l := acquire(t, s, "L", "a", LongTTL)
		got, err := s.GetLease(ctx, "L")
		must(t, err, "GetLease")
		sameLease(t, got, l, "GetLease")
	}},
	{"HeldByOther", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		l := acquire(t, s, "L", "a", LongTTL)
		_, err := s.AcquireLease(ctx, "L", "b", LongTTL)
		wantErr(t, err, store.ErrLeaseHeld, "AcquireLease by another holder")
		got, err := s.GetLease(ctx, "L")
		must(t, err, "GetLease")
		sameLease(t, got, l, "GetLease after refused acquire")
		// Other lease names are independent.
		acquire(t, s, "M", "b", LongTTL)
	}},
	{"ReacquireBySameHolder", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		l1 := acquire(t, s, "L", "a", LongTTL)
		l2 := acquire(t, s, "L", "a", LongTTL)
		if l2.Token <= l1.Token {
			t.Fatalf("re-acquire token %d, want > %d", l2.Token, l1.Token)
		}
		_, err := s.RenewLease(ctx, l1, LongTTL)
		wantErr(t, err, store.ErrLeaseLost, "RenewLease with the superseded token")
		err = s.PutFenced(ctx, "ns", "k", []byte("old"), "L", l1.Token)
		wantErr(t, err, store.ErrFenced, "PutFenced with the superseded token")
		_, err = s.RenewLease(ctx, l2, LongTTL)
		must(t, err, "RenewLease with the current token")
	}},
	{"Renew", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		// The first TTL only needs to outlast the call to RenewLease.
		const firstTTL = time.Second
		l := acquire(t, s, "L", "a", firstTTL)
		r, err := s.RenewLease(ctx, l, LongTTL)
		must(t, err, "RenewLease")
		if r.Token != l.Token || r.Holder != l.Holder || r.Name != l.Name {
			t.Fatalf("RenewLease changed identity: %+v -> %+v", l, r)
		}
		if !r.Expires.After(l.Expires) {
			t.Fatalf("RenewLease did not extend: %v -> %v", l.Expires, r.Expires)
		}
		got, err := s.GetLease(ctx, "L")
		must(t, err, "GetLease")
		sameLease(t, got, r, "GetLease after renew")
		// A probe lease taken now with the same TTL expires after the original
		// expiry of L on the store's own clock; once it has, L must still be
		// held thanks to the renewal.
		probe := acquire(t, s, "probe", "a", firstTTL)
		waitExpired(t, s, probe)
		_, err = s.AcquireLease(ctx, "L", "b", LongTTL)
		wantErr(t, err, store.ErrLeaseHeld, "AcquireLease after the original TTL of a renewed lease")
		must(t, s.PutFenced(ctx, "ns", "k", []byte("v"), "L", r.Token), "PutFenced with a renewed lease")
		// Renewing with a shorter TTL is allowed and shortens it.
		r2, err := s.RenewLease(ctx, r, ShortTTL)
		must(t, err, "RenewLease shorter")
		if !r2.Expires.Before(r.Expires) {
			t.Fatalf("RenewLease with a shorter TTL did not shorten: %v -> %v", r.Expires, r2.Expires)
		}
	}},
	{"ExpiryTakeover", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		a := acquire(t, s, "L", "a", ShortTTL)
		b := takeOver(t, s, "L", "b", LongTTL)
		if b.Token <= a.Token {
			t.Fatalf("takeover token %d, want > %d", b.Token, a.Token)
		}
		_, err := s.RenewLease(ctx, a, LongTTL)
		wantErr(t, err, store.ErrLeaseLost, "RenewLease after takeover")
		wantErr(t, s.ReleaseLease(ctx, a), store.ErrLeaseLost, "ReleaseLease after takeover")
		got, err := s.GetLease(ctx, "L")
		must(t, err, "GetLease")
		sameLease(t, got, b, "GetLease after takeover (old holder's release must not remove it)")
		_, err = s.AcquireLease(ctx, "L", "a", LongTTL)
		wantErr(t, err, store.ErrLeaseHeld, "old holder re-acquiring")
	}},
	{"ExpiredWithoutTakeover", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		a := acquire(t, s, "L", "a", ShortTTL)
		waitExpired(t, s, a)
		got, err := s.GetLease(ctx, "L")
		must(t, err, "GetLease of an expired lease")
		sameLease(t, got, a, "GetLease of an expired lease")
		_, err = s.RenewLease(ctx, a, LongTTL)
		wantErr(t, err, store.ErrLeaseLost, "RenewLease after expiry")
		wantErr(t, s.ReleaseLease(ctx, a), store.ErrLeaseLost, "ReleaseLease after expiry")
		_, err = s.GetLease(ctx, "L")
		wantErr(t, err, store.ErrNotFound, "GetLease after releasing an expired lease")
		a2 := acquire(t, s, "L", "a", LongTTL)
		if a2.Token <= a.Token {
			t.Fatalf("new token %d, want > %d", a2.Token, a.Token)
		}
	}},
	{"ReleaseReacquire", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		a := acquire(t, s, "L", "a", LongTTL)
		must(t, s.ReleaseLease(ctx, a), "ReleaseLease")
		_, err := s.GetLease(ctx, "L")
		wantErr(t, err, store.ErrNotFound, "GetLease after release")
		wantErr(t, s.ReleaseLease(ctx, a), store.ErrLeaseLost, "ReleaseLease twice")
		_, err = s.RenewLease(ctx, a, LongTTL)
		wantErr(t, err, store.ErrLeaseLost, "RenewLease after release")
		b := acquire(t, s, "L", "b", LongTTL)
		if b.Token <= a.Token {
			t.Fatalf("token after release %d, want > %d (tokens survive release)", b.Token, a.Token)
		}
		must(t, s.ReleaseLease(ctx, b), "ReleaseLease b")
		a2 := acquire(t, s, "L", "a", LongTTL)
		if a2.Token <= b.Token {
			t.Fatalf("token %d, want > %d", a2.Token, b.Token)
		}
		// A forged lease with the right token but another holder is refused.
		forged := a2
		forged.Holder = "mallory"
		wantErr(t, s.ReleaseLease(ctx, forged), store.ErrLeaseLost, "ReleaseLease by another holder")
		_, err = s.RenewLease(ctx, forged, LongTTL)
		wantErr(t, err, store.ErrLeaseLost, "RenewLease by another holder")
	}},
	{"AcquireRace", func(t *testing.T, s store.Store) {
		const n = 24
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []store.Lease
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				l, err := s.AcquireLease(ctxT(t), "L", fmt.Sprintf("h%d", i), LongTTL)
				if err != nil && !errors.Is(err, store.ErrLeaseHeld) {
					t.Errorf("AcquireLease: %v", err)
				}
				if err == nil {
					mu.Lock()
					winners = append(winners, l)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%d holders acquired the lease, want exactly 1", len(winners))
		}
		got, err := s.GetLease(ctxT(t), "L")
		must(t, err, "GetLease")
		sameLease(t, got, winners[0], "GetLease after race")
	}},
	{"InvalidArguments", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
			if _, err := s.AcquireLease(ctx, "L", "a", ttl); err == nil {
				t.Fatalf("AcquireLease with ttl %v succeeded", ttl)
			}
		}
		if _, err := s.AcquireLease(ctx, "", "a", LongTTL); err == nil {
			t.Fatal("AcquireLease with an empty name succeeded")
		}
		if _, err := s.AcquireLease(ctx, "L", "", LongTTL); err == nil {
			t.Fatal("AcquireLease with an empty holder succeeded")
		}
		l := acquire(t, s, "L", "a", LongTTL)
		if _, err := s.RenewLease(ctx, l, 0); err == nil {
			t.Fatal("RenewLease with ttl 0 succeeded")
		}
		got, err := s.GetLease(ctx, "L")
		must(t, err, "GetLease")
		sameLease(t, got, l, "lease after refused renew")
	}},
}

var fencedTests = []test{
	{"CurrentToken", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		l := acquire(t, s, "L", "a", LongTTL)
		must(t, s.PutFenced(ctx, "ns", "k", []byte("v1"), "L", l.Token), "PutFenced")
		must(t, s.PutFenced(ctx, "ns", "k", []byte("v2"), "L", l.Token), "PutFenced overwrite")
		if got := getString(t, s, "ns", "k"); got != "v2" {
			t.Fatalf("Get = %q, want v2", got)
		}
		must(t, s.PutFenced(ctx, "other", "\x00{k}", nil, "L", l.Token), "PutFenced other namespace")
	}},
	{"NoOrWrongLease", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		err := s.PutFenced(ctx, "ns", "k", []byte("v"), "L", 1)
		wantErr(t, err, store.ErrFenced, "PutFenced without a lease")
		l := acquire(t, s, "L", "a", LongTTL)
		for _, tok := range []uint64{0, l.Token - 1, l.Token + 1} {
			err = s.PutFenced(ctx, "ns", "k", []byte("v"), "L", tok)
			wantErr(t, err, store.ErrFenced, fmt.Sprintf("PutFenced with token %d (current %d)", tok, l.Token))
		}
		err = s.PutFenced(ctx, "ns", "k", []byte("v"), "M", l.Token)
		wantErr(t, err, store.ErrFenced, "PutFenced naming another lease")
		must(t, s.ReleaseLease(ctx, l), "ReleaseLease")
		err = s.PutFenced(ctx, "ns", "k", []byte("v"), "L", l.Token)
		wantErr(t, err, store.ErrFenced, "PutFenced after release")
		_, err = s.Get(ctx, "ns", "k")
		wantErr(t, err, store.ErrNotFound, "a fenced write wrote something")
	}},
	{"Append", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		_, err := s.AppendFenced(ctx, "log", "L", 1, []byte("x"))
		wantErr(t, err, store.ErrFenced, "AppendFenced without a lease")
		a := acquire(t, s, "L", "a", ShortTTL)
		seq, err := s.AppendFenced(ctx, "log", "L", a.Token, []byte("a1"), []byte("a2"))
		must(t, err, "AppendFenced")
		if seq != 2 {
			t.Fatalf("AppendFenced returned %d, want 2", seq)
		}
		if seq, err := s.Append(ctx, "log", []byte("plain")); err != nil || seq != 3 {
			t.Fatalf("Append after AppendFenced: %d %v, want 3: one sequence for both", seq, err)
		}
		b := takeOver(t, s, "L", "b", LongTTL)
		_, err = s.AppendFenced(ctx, "log", "L", a.Token, []byte("late"))
		wantErr(t, err, store.ErrFenced, "AppendFenced by the old holder after takeover")
		seq, err = s.AppendFenced(ctx, "log", "L", b.Token, []byte("b1"))
		must(t, err, "AppendFenced by the new holder")
		if seq != 4 {
			t.Fatalf("AppendFenced returned %d, want 4 (a refused append takes no number)", seq)
		}
		entries, err := s.ReadLog(ctx, "log", 0, 0)
		must(t, err, "ReadLog")
		var got []string
		for _, e := range entries {
			got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Value))
		}
		if want := "1:a1 2:a2 3:plain 4:b1"; strings.Join(got, " ") != want {
			t.Fatalf("log %q, want %q", strings.Join(got, " "), want)
		}
	}},
	{"AfterTakeover", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		a := acquire(t, s, "L", "a", ShortTTL)
		b := takeOver(t, s, "L", "b", LongTTL)
		must(t, s.PutFenced(ctx, "ns", "k", []byte("from b"), "L", b.Token), "PutFenced by new holder")
		err := s.PutFenced(ctx, "ns", "k", []byte("from a"), "L", a.Token)
		wantErr(t, err, store.ErrFenced, "PutFenced by old holder after takeover")
		if got := getString(t, s, "ns", "k"); got != "from b" {
			t.Fatalf("old holder overwrote the new holder's value: %q", got)
		}
	}},
	{"Expired", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		a := acquire(t, s, "L", "a", ShortTTL)
		// Keep writing until the store refuses; every accepted write is
		// recorded, the refused one must leave no trace.
		var last string
		waitFor(t, "PutFenced to be refused after expiry", func() bool {
			v := fmt.Sprintf("w%d", time.Now().UnixNano())
			err := s.PutFenced(ctx, "ns", "k", []byte(v), "L", a.Token)
			if err == nil {
				last = v
				return false
			}
			wantErr(t, err, store.ErrFenced, "PutFenced after expiry")
			return true
		})
		err := s.PutFenced(ctx, "ns", "k", []byte("late"), "L", a.Token)
		wantErr(t, err, store.ErrFenced, "PutFenced after expiry")
		got, err := s.Get(ctx, "ns", "k")
		switch {
		case last == "":
			wantErr(t, err, store.ErrNotFound, "Get after only refused writes")
		case err != nil:
			t.Fatalf("Get: %v", err)
		case string(got) != last:
			t.Fatalf("Get = %q, want the last accepted write %q", got, last)
		}
	}},
	{"ConcurrentWithTakeover", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		a := acquire(t, s, "L", "a", ShortTTL)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		// The old holder keeps writing while b takes over; whatever it
		// manages before the takeover, b's write afterwards must stick.
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := s.PutFenced(ctx, "ns", "k", fmt.Appendf(nil, "a%d", i), "L", a.Token)
				if err != nil && !errors.Is(err, store.ErrFenced) {
					t.Errorf("PutFenced: %v", err)
					return
				}
			}
		})
		b := takeOver(t, s, "L", "b", LongTTL)
		must(t, s.PutFenced(ctx, "ns", "k", []byte("b"), "L", b.Token), "PutFenced by new holder")
		time.Sleep(20 * time.Millisecond) // give the old holder's loop a few more tries
		close(stop)
		wg.Wait()
		if got := getString(t, s, "ns", "k"); got != "b" {
			t.Fatalf("value = %q after takeover, want b", got)
		}
	}},
}
