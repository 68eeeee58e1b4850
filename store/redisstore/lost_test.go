package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
)

// TestFencingAfterLostData: the store loses every key (a Redis restarted
// without persistence) while a lease holder still runs. Whoever acquires
// the lease next must get a token the old holder never had, or the old
// holder's fenced writes would pass again.
func TestFencingAfterLostData(t *testing.T) {
	ctx := context.Background()
	p := uniquePrefix()
	a, b := newStore(t, p), newStore(t, p)
	la, err := a.AcquireLease(ctx, "L", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := adminClient(t)
	for _, k := range keysOf(t, c, p) {
		if err := c.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lb, err := b.AcquireLease(ctx, "L", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token <= la.Token {
		t.Fatalf("token after the loss %d, want above the old holder's %d", lb.Token, la.Token)
	}
	if err := a.PutFenced(ctx, "ns", "k", []byte("stale"), "L", la.Token); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old holder's fenced write after the loss: %v, want ErrFenced", err)
	}
	if _, err := a.RenewLease(ctx, la, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("old holder's renewal after the loss: %v, want ErrLeaseLost", err)
	}
}

// TestUnavailable: calls to a server that does not answer (paused) or is
// gone (killed) fail with store.ErrUnavailable within the call timeout,
// never with an error callers cannot tell from a bug, and the store works
// again once the server is back.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	n := redistest.StartNode(t, redistest.NodeOptions{Args: []string{"--save", "", "--appendonly", "no"}})
	s, err := redisstore.New(ctx, "redis://"+n.Addr()+"/0", redisstore.WithCallTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, "ns", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	fails := func(what string) {
		t.Helper()
		start := time.Now()
		err := s.Put(ctx, "ns", "k", []byte("v"))
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s: Put = %v, want ErrUnavailable", what, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: Put took %v with a 1s call timeout", what, d)
		}
		t.Logf("%s: %v", what, err)
	}
	works := func(what string) {
		t.Helper()
		redistest.WaitFor(t, 15*time.Second, what, func() bool { return s.Put(ctx, "ns", "k", []byte("v")) == nil })
	}
	n.Pause()
	fails("paused server")
	n.Resume()
	works("the resumed server to answer")
	n.Kill()
	fails("killed server")
	n.Restart(t)
	works("the restarted server to answer")
}
