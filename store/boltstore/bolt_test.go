package boltstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/store/storetest"
)

func open(tb testing.TB, path string, opts ...boltstore.Option) *boltstore.Store {
	tb.Helper()
	s, err := boltstore.Open(path, opts...)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "state.db"))
	})
}

func TestSecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open(t, path)
	start := time.Now()
	// bbolt's lock is an flock(2) on a fresh open file description, so a
	// second Open in the same process contends exactly like another process.
	s, err := boltstore.Open(path, boltstore.WithLockTimeout(100*time.Millisecond))
	if err == nil {
		_ = s.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second Open took %v", d)
	}
	t.Logf("error: %v", err)
}

func TestReopenKeepsState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	if err := s.Put(ctx, "ns", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "log", []byte("a"), []byte("b"), []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimLog(ctx, "log", 3); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "L", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	if v, err := s.Get(ctx, "ns", "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get after reopen = %q, %v", v, err)
	}
	// The counters survive a restart: no seq or token is handed out twice.
	if last, err := s.Append(ctx, "log", []byte("d")); err != nil || last != 4 {
		t.Fatalf("Append after reopen = %d, %v; want 4", last, err)
	}
	l2, err := s.AcquireLease(ctx, "L", "b", time.Minute)
	if err != nil || l2.Token <= l.Token {
		t.Fatalf("AcquireLease after reopen = %+v, %v; want token > %d", l2, err, l.Token)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := boltstore.Open(filepath.Join(t.TempDir(), "missing", "state.db")); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
	path := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(path, []byte("this is not a bbolt file, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := boltstore.Open(path); err == nil {
		_ = s.Close()
		t.Fatal("Open of a non-bbolt file succeeded")
	}
}

func bench(b *testing.B, fn func(*testing.B, store.Store)) {
	for _, mode := range []struct {
		name string
		opts []boltstore.Option
	}{{"fsync", nil}, {"nosync", []boltstore.Option{boltstore.WithNoSync()}}} {
		b.Run(mode.name, func(b *testing.B) {
			fn(b, open(b, filepath.Join(b.TempDir(), "bench.db"), mode.opts...))
		})
	}
}

func BenchmarkPut(b *testing.B)       { bench(b, storetest.BenchPut) }
func BenchmarkPutFenced(b *testing.B) { bench(b, storetest.BenchPutFenced) }
func BenchmarkAppend(b *testing.B)    { bench(b, storetest.BenchAppend) }
