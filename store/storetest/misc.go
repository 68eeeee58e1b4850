package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// calls exercises every method once; used for Close and cancellation.
func calls(s store.Store, l store.Lease) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Get": func(ctx context.Context) error { _, err := s.Get(ctx, "ns", "k"); return err },
		"Put": func(ctx context.Context) error { return s.Put(ctx, "ns", "k", []byte("v")) },
		"PutIfAbsent": func(ctx context.Context) error {
			_, err := s.PutIfAbsent(ctx, "ns", "new", []byte("v"))
			return err
		},
		"Delete": func(ctx context.Context) error { return s.Delete(ctx, "ns", "k") },
		"List":   func(ctx context.Context) error { _, err := s.List(ctx, "ns"); return err },
		"PutFenced": func(ctx context.Context) error {
			return s.PutFenced(ctx, "ns", "k", []byte("v"), l.Name, l.Token)
		},
		"CompareAndSwap": func(ctx context.Context) error {
			_, err := s.CompareAndSwap(ctx, "ns", "k", []byte("v"), []byte("w"))
			return err
		},
		"CompareAndSwapFenced": func(ctx context.Context) error {
			_, err := s.CompareAndSwapFenced(ctx, "ns", "k", []byte("w"), []byte("v"), l.Name, l.Token)
			return err
		},
		"Append": func(ctx context.Context) error { _, err := s.Append(ctx, "log", []byte("v")); return err },
		"ReadLog": func(ctx context.Context) error {
			_, err := s.ReadLog(ctx, "log", 0, 10)
			return err
		},
		"TrimLog":   func(ctx context.Context) error { return s.TrimLog(ctx, "log", 1) },
		"DeleteLog": func(ctx context.Context) error { return s.DeleteLog(ctx, "log") },
		"LogLen":    func(ctx context.Context) error { _, err := s.LogLen(ctx, "log"); return err },
		"AcquireLease": func(ctx context.Context) error {
			_, err := s.AcquireLease(ctx, "other", "h", LongTTL)
			return err
		},
		"RenewLease":   func(ctx context.Context) error { _, err := s.RenewLease(ctx, l, LongTTL); return err },
		"ReleaseLease": func(ctx context.Context) error { return s.ReleaseLease(ctx, l) },
		"GetLease":     func(ctx context.Context) error { _, err := s.GetLease(ctx, l.Name); return err },
		"Ping":         func(ctx context.Context) error { return s.Ping(ctx) },
	}
}

var miscTests = []test{
	{"Ping", func(t *testing.T, s store.Store) {
		must(t, s.Ping(ctxT(t)), "Ping")
	}},
	{"Close", func(t *testing.T, s store.Store) {
		l := acquire(t, s, "L", "a", LongTTL)
		must(t, s.Close(), "Close")
		for name, call := range calls(s, l) {
			wantErr(t, call(context.Background()), store.ErrClosed, name+" after Close")
		}
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
	}},
	{"CloseWhileBusy", func(t *testing.T, s store.Store) {
		// Calls racing with Close either complete or fail with ErrClosed
		// (or the context error); they must not panic or hang.
		l := acquire(t, s, "L", "a", LongTTL)
		var wg sync.WaitGroup
		for name, call := range calls(s, l) {
			wg.Go(func() {
				for range 20 {
					err := call(context.Background())
					if errors.Is(err, store.ErrClosed) {
						return
					}
					if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrLeaseLost) &&
						!errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrLeaseHeld) {
						t.Errorf("%s during Close: %v", name, err)
						return
					}
				}
			})
		}
		time.Sleep(5 * time.Millisecond)
		must(t, s.Close(), "Close")
		wg.Wait()
	}},
	{"CanceledContext", func(t *testing.T, s store.Store) {
		l := acquire(t, s, "L", "a", LongTTL)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for name, call := range calls(s, l) {
			wantErr(t, call(ctx), context.Canceled, name+" with a canceled context")
		}
		// Nothing may have been written.
		_, err := s.Get(ctxT(t), "ns", "new")
		wantErr(t, err, store.ErrNotFound, "Get after canceled PutIfAbsent")
		got, err := s.GetLease(ctxT(t), "L")
		must(t, err, "GetLease after canceled calls")
		sameLease(t, got, l, "lease after canceled calls")
	}},
	{"EmptyNames", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		errs := map[string]error{}
		_, errs["Get"] = s.Get(ctx, "", "k")
		errs["Put"] = s.Put(ctx, "", "k", nil)
		_, errs["PutIfAbsent"] = s.PutIfAbsent(ctx, "", "k", nil)
		errs["Delete"] = s.Delete(ctx, "", "k")
		_, errs["List"] = s.List(ctx, "")
		errs["PutFenced ns"] = s.PutFenced(ctx, "", "k", nil, "L", 1)
		errs["PutFenced lease"] = s.PutFenced(ctx, "ns", "k", nil, "", 1)
		_, errs["CompareAndSwap"] = s.CompareAndSwap(ctx, "", "k", nil, nil)
		_, errs["CompareAndSwapFenced ns"] = s.CompareAndSwapFenced(ctx, "", "k", nil, nil, "L", 1)
		_, errs["CompareAndSwapFenced lease"] = s.CompareAndSwapFenced(ctx, "ns", "k", nil, nil, "", 1)
		_, errs["Append"] = s.Append(ctx, "", []byte("v"))
		_, errs["ReadLog"] = s.ReadLog(ctx, "", 0, 0)
		errs["TrimLog"] = s.TrimLog(ctx, "", 1)
		errs["DeleteLog"] = s.DeleteLog(ctx, "")
		_, errs["LogLen"] = s.LogLen(ctx, "")
		_, errs["GetLease"] = s.GetLease(ctx, "")
		_, errs["RenewLease"] = s.RenewLease(ctx, store.Lease{Holder: "a", Token: 1}, LongTTL)
		errs["ReleaseLease"] = s.ReleaseLease(ctx, store.Lease{Holder: "a", Token: 1})
		for name, err := range errs {
			if err == nil {
				t.Errorf("%s with an empty name succeeded", name)
			}
		}
	}},
	{"MixedConcurrency", func(t *testing.T, s store.Store) {
		// Everything at once, for the race detector; sentinel errors are
		// expected outcomes of the contention, anything else is a failure.
		expected := func(err error) bool {
			return err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseHeld) ||
				errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrFenced)
		}
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				ctx := ctxT(t)
				holder := fmt.Sprintf("h%d", w)
				for i := range 30 {
					key := fmt.Sprintf("k%d", i%5)
					errs := []error{
						s.Put(ctx, "ns", key, []byte(holder)),
						s.Delete(ctx, "ns", fmt.Sprintf("k%d", (i+2)%5)),
					}
					_, err := s.Get(ctx, "ns", key)
					errs = append(errs, err)
					_, err = s.List(ctx, "ns")
					errs = append(errs, err)
					last, err := s.Append(ctx, "log", []byte(holder), []byte(key))
					errs = append(errs, err)
					_, err = s.ReadLog(ctx, "log", last/2, 5)
					errs = append(errs, err)
					if i%10 == 9 {
						errs = append(errs, s.TrimLog(ctx, "log", last/2))
					}
					l, err := s.AcquireLease(ctx, "L", holder, LongTTL)
					errs = append(errs, err)
					if err == nil {
						errs = append(errs, s.PutFenced(ctx, "ns", "fenced", []byte(holder), "L", l.Token))
						_, err = s.RenewLease(ctx, l, LongTTL)
						errs = append(errs, err, s.ReleaseLease(ctx, l))
					}
					_, err = s.GetLease(ctx, "L")
					errs = append(errs, err)
					for _, err := range errs {
						if !expected(err) {
							t.Errorf("unexpected error: %v", err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
	}},
}
