package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// pollEvery is how often a wait checks its condition: soon enough after it
// comes true not to slow the tests, seldom enough that the checks (HTTP
// requests, scans of the gateway's log) do not load what they observe.
const pollEvery = 50 * time.Millisecond

// eventually waits until cond returns nil, failing the test after timeout
// with what was awaited and cond's last error (why it did not hold yet).
// A cond error wrapped by wait.Abort fails at once. Every wait of these
// tests goes through it or eventuallyCtx.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := wait.Until(context.Background(), what, timeout, pollEvery, cond); err != nil {
		t.Fatal(err)
	}
}

// eventuallyCtx is eventually for goroutines other than the test's and for
// helpers that return errors: it returns the failure rather than failing
// the test, and also gives up when ctx ends (timeout 0: only then).
func eventuallyCtx(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	return wait.Until(ctx, what, timeout, pollEvery, cond)
}
