package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// swap runs CompareAndSwap and fails the test on an error.
func swap(t *testing.T, s store.Store, ns, key string, old, val []byte) bool {
	t.Helper()
	ok, err := s.CompareAndSwap(ctxT(t), ns, key, old, val)
	must(t, err, fmt.Sprintf("CompareAndSwap(%q, %q, %q → %q)", ns, key, old, val))
	return ok
}

// wantValue fails unless key holds want (nil: absent).
func wantValue(t *testing.T, s store.Store, ns, key string, want []byte, what string) {
	t.Helper()
	got, err := s.Get(ctxT(t), ns, key)
	if want == nil {
		wantErr(t, err, store.ErrNotFound, what)
		return
	}
	must(t, err, what)
	if string(got) != string(want) {
		t.Fatalf("%s: value %q, want %q", what, got, want)
	}
}

var casTests = []test{
	{"AbsentAndPresent", func(t *testing.T, s store.Store) {
		if !swap(t, s, "ns", "k", nil, []byte("v1")) {
			t.Fatal("swap from absent on a missing key refused")
		}
		wantValue(t, s, "ns", "k", []byte("v1"), "after the first swap")
		if swap(t, s, "ns", "k", nil, []byte("x")) {
			t.Fatal("swap from absent on an existing key succeeded")
		}
		if swap(t, s, "ns", "k", []byte("v0"), []byte("x")) {
			t.Fatal("swap from a stale value succeeded")
		}
		wantValue(t, s, "ns", "k", []byte("v1"), "after refused swaps")
		if !swap(t, s, "ns", "k", []byte("v1"), []byte("v2")) {
			t.Fatal("swap from the current value refused")
		}
		wantValue(t, s, "ns", "k", []byte("v2"), "after the second swap")
		must(t, s.Delete(ctxT(t), "ns", "k"), "Delete")
		if swap(t, s, "ns", "k", []byte("v2"), []byte("x")) {
			t.Fatal("swap from a value on a deleted key succeeded")
		}
		wantValue(t, s, "ns", "k", nil, "after a refused swap on a deleted key")
		// Other namespaces hold other keys.
		must(t, s.Put(ctxT(t), "other", "k", []byte("o")), "Put")
		if swap(t, s, "ns", "k", []byte("o"), []byte("x")) || !swap(t, s, "ns", "k", nil, []byte("n")) {
			t.Fatal("swap saw another namespace's key")
		}
		wantValue(t, s, "other", "k", []byte("o"), "the other namespace")
	}},
	{"EmptyIsNotAbsent", func(t *testing.T, s store.Store) {
		if swap(t, s, "ns", "k", []byte{}, []byte("x")) {
			t.Fatal("swap from the empty value on a missing key succeeded")
		}
		wantValue(t, s, "ns", "k", nil, "after a refused swap")
		must(t, s.Put(ctxT(t), "ns", "k", []byte{}), "Put empty")
		if swap(t, s, "ns", "k", nil, []byte("x")) {
			t.Fatal("swap from absent on an empty value succeeded")
		}
		if !swap(t, s, "ns", "k", []byte{}, nil) {
			t.Fatal("swap from the empty value refused")
		}
		wantValue(t, s, "ns", "k", []byte{}, "a nil new value is the empty value")
	}},
	{"BinarySafe", func(t *testing.T, s store.Store) {
		val := allBytes()
		for _, k := range binaryKeys {
			v := append([]byte(k), val...)
			if !swap(t, s, "{ns}", k, nil, v) {
				t.Fatalf("swap from absent for key %q refused", k)
			}
			// A prefix, or the value with a NUL after it, is another value.
			if swap(t, s, "{ns}", k, v[:len(v)-1], []byte("x")) || swap(t, s, "{ns}", k, append(v, 0), []byte("x")) {
				t.Fatalf("swap for key %q compared values by less than their bytes", k)
			}
			if !swap(t, s, "{ns}", k, v, append(v, v...)) {
				t.Fatalf("swap for key %q from its binary value refused", k)
			}
			wantValue(t, s, "{ns}", k, append(v, v...), fmt.Sprintf("key %q", k))
		}
	}},
	{"OneWinnerPerRound", func(t *testing.T, s store.Store) {
		const n = 32
		var cur []byte // absent in the first round
		for round := range 4 {
			winners := race(n, func(i int) (string, bool) {
				v := fmt.Sprintf("round-%d-candidate-%d", round, i)
				ok, err := s.CompareAndSwap(ctxT(t), "ns", "k", cur, []byte(v))
				if err != nil {
					t.Errorf("CompareAndSwap: %v", err)
				}
				return v, ok
			})
			if len(winners) != 1 {
				t.Fatalf("round %d: %d goroutines swapped the same value, want exactly 1: %v", round, len(winners), winners)
			}
			wantValue(t, s, "ns", "k", []byte(winners[0]), fmt.Sprintf("round %d", round))
			cur = []byte(winners[0])
		}
	}},
	{"NoLostUpdate", func(t *testing.T, s store.Store) {
		// Read, add one, swap, again on conflict: concurrent increments
		// must all count.
		const workers, each = 8, 25
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					if err := increment(t, s); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		wantValue(t, s, "ns", "counter", []byte(strconv.Itoa(workers*each)), "the counter")
	}},
	{"Fenced", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		_, err := s.CompareAndSwapFenced(ctx, "ns", "k", nil, []byte("v"), "L", 1)
		wantErr(t, err, store.ErrFenced, "fenced swap without a lease")
		a := acquire(t, s, "L", "a", LongTTL)
		_, err = s.CompareAndSwapFenced(ctx, "ns", "k", nil, []byte("v"), "L", a.Token+1)
		wantErr(t, err, store.ErrFenced, "fenced swap with a wrong token")
		wantValue(t, s, "ns", "k", nil, "after fenced swaps were refused")
		ok, err := s.CompareAndSwapFenced(ctx, "ns", "k", nil, []byte("a1"), "L", a.Token)
		must(t, err, "fenced swap")
		if !ok {
			t.Fatal("fenced swap from absent with the current token refused")
		}
		ok, err = s.CompareAndSwapFenced(ctx, "ns", "k", []byte("stale"), []byte("x"), "L", a.Token)
		must(t, err, "fenced swap from a stale value")
		if ok {
			t.Fatal("fenced swap from a stale value succeeded")
		}
		must(t, s.ReleaseLease(ctx, a), "ReleaseLease")
		b := acquire(t, s, "L", "b", LongTTL)
		_, err = s.CompareAndSwapFenced(ctx, "ns", "k", []byte("a1"), []byte("late"), "L", a.Token)
		wantErr(t, err, store.ErrFenced, "fenced swap by the old holder after another took the lease, its old value current")
		wantValue(t, s, "ns", "k", []byte("a1"), "after the old holder's swap was refused")
		ok, err = s.CompareAndSwapFenced(ctx, "ns", "k", []byte("a1"), []byte("b1"), "L", b.Token)
		must(t, err, "fenced swap by the new holder")
		if !ok {
			t.Fatal("fenced swap by the new holder refused")
		}
		wantValue(t, s, "ns", "k", []byte("b1"), "after the new holder's swap")
	}},
}

// increment adds one to the decimal counter "counter" of "ns" by
// compare-and-swap, read again after every conflict.
func increment(t *testing.T, s store.Store) error {
	for {
		var old []byte
		n := 0
		v, err := s.Get(ctxT(t), "ns", "counter")
		switch {
		case err == nil:
			old = v
			if n, err = strconv.Atoi(string(v)); err != nil {
				return fmt.Errorf("counter %q: %w", v, err)
			}
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("Get: %w", err)
		}
		ok, err := s.CompareAndSwap(ctxT(t), "ns", "counter", old, []byte(strconv.Itoa(n+1)))
		if err != nil {
			return fmt.Errorf("CompareAndSwap: %w", err)
		}
		if ok {
			return nil
		}
	}
}
