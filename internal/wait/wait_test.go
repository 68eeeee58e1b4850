package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep with a cancelled context = %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep did not end with its context")
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}

type fakeTB struct{ failed string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestFor(t *testing.T) {
	n := 0
	tb := &fakeTB{}
	For(tb, "three polls", time.Second, func() bool { n++; return n == 3 })
	if tb.failed != "" || n != 3 {
		t.Fatalf("For: %d polls, failure %q", n, tb.failed)
	}
	calls := 0
	For(tb, "never", 20*time.Millisecond, func() bool { calls++; return tb.failed != "" })
	if tb.failed == "" {
		t.Fatal("For did not fail on a condition that never held")
	}
}

func TestUntil(t *testing.T) {
	n := 0
	err := Until(context.Background(), "three polls", time.Second, time.Millisecond, func() error {
		n++
		if n < 3 {
			return fmt.Errorf("poll %d", n)
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Until: %d polls, %v", n, err)
	}

	// Timed out: the message names what was awaited and the last reason.
	err = Until(context.Background(), "never", 20*time.Millisecond, time.Millisecond, func() error { return errors.New("still no") })
	if err == nil || !strings.Contains(err.Error(), "waiting for never") || !strings.Contains(err.Error(), "still no") {
		t.Fatalf("Until on a condition that never held: %v", err)
	}

	// Aborted: at once, with cond's error.
	start := time.Now()
	boom := errors.New("boom")
	err = Until(context.Background(), "abort", time.Hour, time.Millisecond, func() error { return Abort(boom) })
	if !errors.Is(err, boom) || time.Since(start) > time.Second {
		t.Fatalf("Until with Abort: %v after %v", err, time.Since(start))
	}

	// The context ends the wait, with or without a timeout of its own.
	for _, timeout := range []time.Duration{0, time.Hour} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err = Until(ctx, "ctx", timeout, time.Millisecond, func() error { return errors.New("no") })
		cancel()
		if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
			t.Fatalf("Until with an ended context (timeout %v): %v", timeout, err)
		}
	}
}
