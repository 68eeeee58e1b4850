// Package redistest gives tests a real Redis: VSG_TEST_REDIS (a redis://
// URL) if set, otherwise a private redis-server started for the test
// binary. Any package whose tests need the Redis store uses it from its
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
//
// Without a redis-server binary the tests that ask for a URL skip, unless
// CI is set, where that is a failure: CI must not go green without having
// run them.
//
// Tests that need Redis processes of their own — to restart, pause or
// fail over — start them with StartNode, StartCluster (three primaries,
// three replicas) and StartSentinel (a primary, a replica, three
// Sentinels).
//
// Main also fails the tests if they leave goroutines behind (goleak), checked
// once the server and its waiter are gone.
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"

	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
)

var (
	testURL    string
	skipReason string
	prefixSeq  atomic.Uint64
)

// Main starts the server if needed, runs m, stops the server and checks
// that no goroutine is left (but leaktest.Ignored and those opts ignore). It returns the exit
// code for os.Exit.
func Main(m *testing.M, opts ...goleak.Option) int {
	code := run(m)
	if code != 0 {
		return code
	}
	if err := goleak.Find(append(leaktest.Ignored(), opts...)...); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: goroutines left behind by the tests:", err)
		return 1
	}
	return 0
}

func run(m *testing.M) int {
	if u := os.Getenv("VSG_TEST_REDIS"); u != "" {
		testURL = u
		return m.Run()
	}
	bin := findRedisServer()
	if bin == "" {
		msg := "redis-server not found: install it, set VSG_REDIS_SERVER to its path, or set VSG_TEST_REDIS to a redis:// URL"
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "FAIL: "+msg+" (CI is set, so the Redis tests may not be skipped)")
			return 1
		}
		skipReason = msg
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "vsg-redis-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := startRedis(bin, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start redis-server:", err)
		return 1
	}
	defer srv.stop()
	testURL = srv.url
	return m.Run()
}

// URL returns the test server's redis:// URL, or skips tb when there is
// none.
func URL(tb testing.TB) string {
	tb.Helper()
	if skipReason != "" {
		tb.Skip(skipReason)
	}
	if testURL == "" {
		tb.Fatal("redistest: no server; call redistest.Main from TestMain")
	}
	return testURL
}

// Prefix returns a key prefix no other call returns: it keeps concurrent
// tests, and concurrent test binaries sharing VSG_TEST_REDIS, apart.
func Prefix() string {
	return fmt.Sprintf("vsgtest-%d-%d-%08x", os.Getpid(), prefixSeq.Add(1), rand.Uint32())
}

// NewStore opens a store under prefix and removes the prefix's keys when
// the test ends.
func NewStore(tb testing.TB, prefix string) *redisstore.Store {
	tb.Helper()
	u := URL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, u, redisstore.WithPrefix(prefix))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		_ = s.Close()
		c := Client(tb)
		for _, k := range Keys(tb, c, prefix) {
			c.Del(context.Background(), k)
		}
	})
	return s
}

// Client returns a plain client of the test server, closed when the test
// ends.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	o, err := redis.ParseURL(URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Keys lists the keys a store under prefix has written, sorted.
func Keys(tb testing.TB, c *redis.Client, prefix string) []string {
	tb.Helper()
	var keys []string
	it := c.Scan(context.Background(), 0, "{"+prefix+"}:*", 100).Iterator()
	for it.Next(context.Background()) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		tb.Fatalf("scan: %v", err)
	}
	sort.Strings(keys)
	return keys
}
