// Package wait holds the two waits the code base needs everywhere: a sleep
// that a context ends early, and, for tests, polling a condition until it
// holds or a deadline passes (never a fixed sleep standing in for one).
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TB is the part of testing.TB that For needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// For polls cond every millisecond until it holds, failing the test with
// what was awaited once timeout has passed.
func For(t TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}
