package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
	"github.com/vstream-gateway/vstream-gateway/store/storetest"
)

// Tests run against a real Redis (see redistest): a private redis-server
// unless VSG_TEST_REDIS names one.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var (
	uniquePrefix = redistest.Prefix
	newStore     = redistest.NewStore
	adminClient  = redistest.Client
	keysOf       = redistest.Keys
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, uniquePrefix()) })
}

// hashTag is the part of key Redis Cluster hashes: the content of the first
// {...} if it is non-empty, else the whole key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestKeyLayout(t *testing.T) {
	ctx := context.Background()
	p := uniquePrefix()
	s := newStore(t, p)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(ctx, "streams", "orders", []byte("def")))
	must(s.Put(ctx, "{odd}", "k", []byte("v")))
	_, err := s.Append(ctx, "spool/orders", []byte("e"))
	must(err)
	_, err = s.AcquireLease(ctx, "leader", "replica-1", time.Minute)
	must(err)

	c := adminClient(t)
	tag := "{" + p + "}"
	want := map[string]string{
		tag + ":ns:streams":          "hash",
		tag + ":ns:{odd}":            "hash",
		tag + ":log:spool/orders":    "stream",
		tag + ":logseq:spool/orders": "string",
		tag + ":lease:leader":        "hash",
		tag + ":leasetok:leader":     "string",
	}
	keys := keysOf(t, c, p)
	if len(keys) != len(want) {
		t.Fatalf("keys = %q, want %d keys", keys, len(want))
	}
	for _, k := range keys {
		typ, ok := want[k]
		if !ok {
			t.Fatalf("unexpected key %q", k)
		}
		if got := c.Type(ctx, k).Val(); got != typ {
			t.Fatalf("key %q has type %s, want %s", k, got, typ)
		}
		// One slot for everything: what makes multi-key scripts legal on a
		// cluster.
		if hashTag(k) != p {
			t.Fatalf("key %q hashes on %q, want %q", k, hashTag(k), p)
		}
	}
}

func TestReplicasShareState(t *testing.T) {
	ctx := context.Background()
	p := uniquePrefix()
	a, b := newStore(t, p), newStore(t, p)

	la, err := a.AcquireLease(ctx, "leader", "a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(ctx, "leader", "b", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("second replica acquiring: %v, want ErrLeaseHeld", err)
	}
	var lb store.Lease
	deadline := time.Now().Add(15 * time.Second)
	for {
		lb, err = b.AcquireLease(ctx, "leader", "b", time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			t.Fatalf("takeover: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.PutFenced(ctx, "state", "k", []byte("b"), "leader", lb.Token); err != nil {
		t.Fatal(err)
	}
	if err := a.PutFenced(ctx, "state", "k", []byte("a"), "leader", la.Token); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old replica's fenced write: %v, want ErrFenced", err)
	}
	if v, err := a.Get(ctx, "state", "k"); err != nil || string(v) != "b" {
		t.Fatalf("Get via old replica = %q, %v", v, err)
	}

	// Agreeing on a value across replicas: exactly one PutIfAbsent wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			ok, err := s.PutIfAbsent(ctx, "keys", "signing", fmt.Appendf(nil, "%d", i))
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d PutIfAbsent winners across replicas, want 1", wins.Load())
	}
}

func TestPrefixesIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := newStore(t, uniquePrefix()), newStore(t, uniquePrefix())
	if err := a.Put(ctx, "ns", "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "ns", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other prefix sees the key: %v", err)
	}
	if _, err := a.AcquireLease(ctx, "L", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(ctx, "L", "b", time.Minute); err != nil {
		t.Fatalf("lease under another prefix: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	testURL := redistest.URL(t)
	for _, tc := range []struct{ name, url, prefix string }{
		{"bad scheme", "http://127.0.0.1:6379", "p"},
		{"unreachable", "redis://127.0.0.1:1/0?dial_timeout=1s", "p"},
		{"empty prefix", testURL, ""},
		{"prefix with brace", testURL, "a{b"},
		{"tls to a plain server", strings.Replace(testURL, "redis://", "rediss://", 1) + "?dial_timeout=1s", "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if s, err := redisstore.New(ctx, tc.url, redisstore.WithPrefix(tc.prefix)); err == nil {
				_ = s.Close()
				t.Fatal("New succeeded")
			} else {
				t.Log(err)
			}
		})
	}
}

func TestNewFromClientKeepsClient(t *testing.T) {
	ctx := context.Background()
	c := adminClient(t)
	s, err := redisstore.NewFromClient(ctx, c, redisstore.WithPrefix(uniquePrefix()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Close closed a client it does not own: %v", err)
	}
}

// TestLeaseUsesServerClock checks Expires is TIME on the server plus ttl.
func TestLeaseUsesServerClock(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, uniquePrefix())
	now, err := adminClient(t).Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "L", "a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Expiry is kept in whole milliseconds.
	if d := l.Expires.Sub(now.Add(time.Hour)); d < -time.Millisecond || d > 5*time.Second {
		t.Fatalf("Expires = %v, server time + ttl = %v", l.Expires, now.Add(time.Hour))
	}
}

func BenchmarkPut(b *testing.B)       { storetest.BenchPut(b, newStore(b, uniquePrefix())) }
func BenchmarkPutFenced(b *testing.B) { storetest.BenchPutFenced(b, newStore(b, uniquePrefix())) }
func BenchmarkAppend(b *testing.B)    { storetest.BenchAppend(b, newStore(b, uniquePrefix())) }
