// Package wait holds the two waits the code base needs everywhere: a sleep
// that a context ends early, and, for tests, polling a condition until it
// holds or a deadline passes (never a fixed sleep standing in for one).
package wait

import (
	"context"
	"errors"
	"fmt"
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

// errNotYet is For's reason for a condition that does not hold yet.
var errNotYet = errors.New("not yet")

// For polls cond every millisecond until it holds, failing the test with
// what was awaited once timeout has passed.
func For(t TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := Until(context.Background(), what, timeout, time.Millisecond, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Until calls cond every interval until it returns nil, and then returns
// nil. cond's error says why the condition does not hold yet. Once timeout
// has passed (timeout 0: no limit but ctx's) or ctx has ended, Until
// returns an error naming what was awaited and cond's last error; an error
// of cond wrapped by Abort ends the wait at once.
//
// It is for callers that cannot fail a test themselves: helpers returning
// errors, and goroutines other than the test's.
func Until(ctx context.Context, what string, timeout, interval time.Duration, cond func() error) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var a abortError
		if errors.As(err, &a) {
			return fmt.Errorf("waiting for %s: %w", what, a.err)
		}
		d := interval
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, err)
			}
			d = min(d, left)
		}
		if cerr := Sleep(ctx, d); cerr != nil {
			return fmt.Errorf("gave up waiting for %s (%v): %w", what, cerr, err)
		}
	}
}

// Abort wraps err so that Until stops waiting at once and fails with it:
// for a condition that can no longer come true (the process awaited has
// exited, two holders of one lease).
func Abort(err error) error { return abortError{err} }

type abortError struct{ err error }

func (a abortError) Error() string { return a.err.Error() }
func (a abortError) Unwrap() error { return a.err }
