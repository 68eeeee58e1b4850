// Package storetest is the conformance suite every store.Store
// implementation must pass. Run it from the implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
//	}
//
// newStore must return an empty store that no other call to newStore shares
// (a new file, a new key prefix) and should register its own Close with
// t.Cleanup; the suite closes some stores itself, so Close must tolerate
// being called twice. Subtests run in parallel.
//
// Expiry is tested with short TTLs and polling for the expected outcome under
// a generous deadline, never with a sleep assumed to be long enough.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// ShortTTL is the lease TTL used where a test waits for expiry.
const ShortTTL = 200 * time.Millisecond

// LongTTL is the lease TTL used where a lease must stay held for the whole
// test, however slow the machine (-race, loaded CI).
const LongTTL = time.Minute

// waitTimeout bounds every poll; far above ShortTTL so that only a real bug
// makes a poll time out.
const waitTimeout = 15 * time.Second

// Run runs the whole suite.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"KV", kvTests},
		{"Log", logTests},
		{"Lease", leaseTests},
		{"Fenced", fencedTests},
		{"CAS", casTests},
		{"Misc", miscTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, newStore(t))
				})
			}
		})
	}
}

type test struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

func ctxT(t *testing.T) context.Context { return t.Context() }

// must fails the test on err.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// waitFor polls cond until it reports true or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getString(t *testing.T, s store.Store, ns, key string) string {
	t.Helper()
	v, err := s.Get(ctxT(t), ns, key)
	must(t, err, fmt.Sprintf("Get(%q, %q)", ns, key))
	return string(v)
}

// binaryKeys are keys that break naive encodings: separators, hash-tag
// braces, NUL, invalid UTF-8, the empty key and a long key.
var binaryKeys = []string{
	"", "a", "a:b", "a/b", "{vsg}", "}{", "\x00", "\x00\x00x", "\xff\xfe", "ключ",
	"with space", "new\nline", string(bytes.Repeat([]byte("k"), 1000)),
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

var kvTests = []test{
	{"GetMissing", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		_, err := s.Get(ctx, "nons", "k")
		wantErr(t, err, store.ErrNotFound, "Get in missing namespace")
		must(t, s.Put(ctx, "ns", "k", []byte("v")), "Put")
		_, err = s.Get(ctx, "ns", "other")
		wantErr(t, err, store.ErrNotFound, "Get missing key")
	}},
	{"PutOverwriteDelete", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		must(t, s.Put(ctx, "ns", "k", []byte("v1")), "Put")
		if got := getString(t, s, "ns", "k"); got != "v1" {
			t.Fatalf("Get = %q, want v1", got)
		}
		must(t, s.Put(ctx, "ns", "k", []byte("v2")), "Put overwrite")
		if got := getString(t, s, "ns", "k"); got != "v2" {
			t.Fatalf("Get after overwrite = %q, want v2", got)
		}
		must(t, s.Delete(ctx, "ns", "k"), "Delete")
		_, err := s.Get(ctx, "ns", "k")
		wantErr(t, err, store.ErrNotFound, "Get after Delete")
		must(t, s.Delete(ctx, "ns", "k"), "Delete again")
		must(t, s.Delete(ctx, "never", "k"), "Delete in missing namespace")
	}},
	{"EmptyAndNilValue", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		must(t, s.Put(ctx, "ns", "nil", nil), "Put nil")
		must(t, s.Put(ctx, "ns", "empty", []byte{}), "Put empty")
		for _, k := range []string{"nil", "empty"} {
			v, err := s.Get(ctx, "ns", k)
			must(t, err, "Get "+k)
			if len(v) != 0 {
				t.Fatalf("Get %s = %q, want empty", k, v)
			}
		}
		recs, err := s.List(ctx, "ns")
		must(t, err, "List")
		if len(recs) != 2 {
			t.Fatalf("List = %d records, want 2 (empty values are values)", len(recs))
		}
	}},
	{"ValuesAreCopied", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		in := []byte("original")
		must(t, s.Put(ctx, "ns", "k", in), "Put")
		copy(in, "CLOBBER!")
		out, err := s.Get(ctx, "ns", "k")
		must(t, err, "Get")
		if string(out) != "original" {
			t.Fatalf("store kept a reference to the caller's slice: %q", out)
		}
		copy(out, "CLOBBER!")
		if got := getString(t, s, "ns", "k"); got != "original" {
			t.Fatalf("store returned a slice it still uses: %q", got)
		}
	}},
	{"ListSorted", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		recs, err := s.List(ctx, "ns")
		must(t, err, "List missing namespace")
		if len(recs) != 0 {
			t.Fatalf("List of missing namespace = %v", recs)
		}
		keys := append([]string{"b", "a", "c", "aa", "B", "a\x00"}, binaryKeys...)
		want := map[string]string{}
		for _, i := range rand.Perm(len(keys)) {
			want[keys[i]] = fmt.Sprintf("v%d", i)
			must(t, s.Put(ctx, "ns", keys[i], []byte(want[keys[i]])), "Put")
		}
		recs, err = s.List(ctx, "ns")
		must(t, err, "List")
		if len(recs) != len(want) {
			t.Fatalf("List = %d records, want %d", len(recs), len(want))
		}
		if !sort.SliceIsSorted(recs, func(i, j int) bool { return recs[i].Key < recs[j].Key }) {
			t.Fatalf("List not sorted by key (byte order)")
		}
		for _, r := range recs {
			if string(r.Value) != want[r.Key] {
				t.Fatalf("List[%q] = %q, want %q", r.Key, r.Value, want[r.Key])
			}
		}
		for k := range want {
			must(t, s.Delete(ctx, "ns", k), "Delete")
		}
		recs, err = s.List(ctx, "ns")
		must(t, err, "List after deleting all")
		if len(recs) != 0 {
			t.Fatalf("List after deleting all = %v", recs)
		}
	}},
	{"BinarySafe", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		val := allBytes()
		for _, ns := range []string{"ns", "a:b", "cursors/orders", "{x}", "ns\xff"} {
			for _, k := range binaryKeys {
				v := append([]byte(k), val...)
				must(t, s.Put(ctx, ns, k, v), fmt.Sprintf("Put(%q, %q)", ns, k))
			}
			for _, k := range binaryKeys {
				got, err := s.Get(ctx, ns, k)
				must(t, err, fmt.Sprintf("Get(%q, %q)", ns, k))
				if !bytes.Equal(got, append([]byte(k), val...)) {
					t.Fatalf("Get(%q, %q) returned different bytes", ns, k)
				}
			}
		}
	}},
	{"NamespacesIsolated", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		nss := []string{"a", "a:b", "a/b", "b", "ab", "a:"}
		for _, ns := range nss {
			must(t, s.Put(ctx, ns, "k", []byte(ns)), "Put")
			must(t, s.Put(ctx, ns, "b:k", []byte(ns)), "Put")
		}
		// Logs and leases named like a namespace must not touch it.
		_, err := s.Append(ctx, "a", []byte("log"))
		must(t, err, "Append")
		_, err = s.AcquireLease(ctx, "a", "h", LongTTL)
		must(t, err, "AcquireLease")
		must(t, s.Delete(ctx, "a", "b:k"), "Delete")
		for _, ns := range nss {
			if got := getString(t, s, ns, "k"); got != ns {
				t.Fatalf("Get(%q, k) = %q", ns, got)
			}
			recs, err := s.List(ctx, ns)
			must(t, err, "List")
			want := 2
			if ns == "a" {
				want = 1
			}
			if len(recs) != want {
				t.Fatalf("List(%q) = %d records, want %d", ns, len(recs), want)
			}
		}
	}},
	{"PutIfAbsent", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		ok, err := s.PutIfAbsent(ctx, "ns", "k", []byte("first"))
		must(t, err, "PutIfAbsent")
		if !ok {
			t.Fatal("PutIfAbsent on a missing key reported false")
		}
		ok, err = s.PutIfAbsent(ctx, "ns", "k", []byte("second"))
		must(t, err, "PutIfAbsent again")
		if ok {
			t.Fatal("PutIfAbsent on an existing key reported true")
		}
		if got := getString(t, s, "ns", "k"); got != "first" {
			t.Fatalf("value = %q, want first", got)
		}
		must(t, s.Delete(ctx, "ns", "k"), "Delete")
		ok, err = s.PutIfAbsent(ctx, "ns", "k", []byte("third"))
		must(t, err, "PutIfAbsent after Delete")
		if !ok || getString(t, s, "ns", "k") != "third" {
			t.Fatal("PutIfAbsent after Delete did not write")
		}
	}},
	{"PutIfAbsentRace", func(t *testing.T, s store.Store) {
		const n = 32
		for round := range 3 {
			key := fmt.Sprintf("signing-key-%d", round)
			winners := race(n, func(i int) (string, bool) {
				v := fmt.Sprintf("candidate-%d", i)
				ok, err := s.PutIfAbsent(ctxT(t), "ns", key, []byte(v))
				if err != nil {
					t.Errorf("PutIfAbsent: %v", err)
				}
				return v, ok
			})
			if len(winners) != 1 {
				t.Fatalf("%d goroutines won PutIfAbsent, want exactly 1: %v", len(winners), winners)
			}
			if got := getString(t, s, "ns", key); got != winners[0] {
				t.Fatalf("stored %q, but the winner wrote %q", got, winners[0])
			}
		}
	}},
	{"ConcurrentPutGetList", func(t *testing.T, s store.Store) {
		const writers, keys = 8, 25
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				ctx := ctxT(t)
				for k := range keys {
					key := fmt.Sprintf("w%02d-k%02d", w, k)
					if err := s.Put(ctx, "ns", key, []byte(key)); err != nil {
						t.Errorf("Put: %v", err)
						return
					}
					if v, err := s.Get(ctx, "ns", key); err != nil || string(v) != key {
						t.Errorf("Get(%q) = %q, %v", key, v, err)
						return
					}
					if _, err := s.List(ctx, "ns"); err != nil {
						t.Errorf("List: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		recs, err := s.List(ctxT(t), "ns")
		must(t, err, "List")
		if len(recs) != writers*keys {
			t.Fatalf("List = %d records, want %d", len(recs), writers*keys)
		}
	}},
}

// race runs try(i) for i in 0..n-1 at once, released together, and
// returns the values of the tries that won.
func race(n int, try func(i int) (string, bool)) []string {
	var wg sync.WaitGroup
	wins := make(chan string, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if v, ok := try(i); ok {
				wins <- v
			}
		})
	}
	close(start)
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	return winners
}
