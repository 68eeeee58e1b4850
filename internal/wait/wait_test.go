package wait

import (
	"context"
	"fmt"
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
