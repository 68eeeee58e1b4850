package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// A webhook whose stream ends (its tables dropped, on_gap fail: DESIGN
// §4.1 rule 9) delivers every batch before the end and is then disabled,
// with the reason in its status, instead of reopening the stream from its
// cursor forever out of sight.
func TestStreamEndDisablesWebhook(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(int, *message, http.ResponseWriter) bool { return false })
	v := e.create(r.url(), nil)
	before := e.opens()
	e.log.addN(2, 1)
	e.log.end(&hub.TablesDroppedError{Keyspace: "ks", Tables: []string{"t"}})
	sv := e.supervise(WithScanInterval(10 * time.Millisecond))
	ctx := context.Background()
	wait.For(t, "the webhook to be disabled", 10*time.Second, func() bool {
		got, _ := e.svc.Get(ctx, testDef.Name, v.ID)
		return got.State == StateDisabled && len(sv.Delivering()) == 0
	})
	if n := e.cursorN(v.ID); n != 3 {
		t.Errorf("cursor at %d, want 3: every row before the end delivered", n)
	}
	got, _ := e.svc.Get(ctx, testDef.Name, v.ID)
	if !strings.Contains(got.DisabledReason, "tables_dropped") || !strings.Contains(got.DisabledReason, "dropped from keyspace ks") {
		t.Errorf("disabled reason %q, want tables_dropped and the error", got.DisabledReason)
	}
	if n := e.opens() - before; n != 1 {
		t.Errorf("the stream was opened %d times to deliver, want once (no retry into the end)", n)
	}
}

// opens is how many feeds the webhook service opened so far.
func (e *env) opens() int {
	e.src.mu.Lock()
	defer e.src.mu.Unlock()
	return e.src.opens
}
