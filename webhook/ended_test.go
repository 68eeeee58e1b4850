package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// A webhook whose stream ends delivers every batch before the end and is
// then disabled, with the reason in its status, instead of reopening the
// stream from its cursor forever out of sight: its tables were dropped
// (on_gap fail: DESIGN §4.1 rule 9), or its cursor needs deleted shards
// that no recorded journal continues (on_gap fail: DESIGN §4 rule 4).
func TestStreamEndDisablesWebhook(t *testing.T) {
	for _, tc := range []struct {
		name         string
		end          error
		reason, text string
	}{
		{"tables dropped", &upstream.TablesDroppedError{Keyspace: "ks", Tables: []string{"t"}}, "tables_dropped", "dropped from keyspace ks"},
		{"reshard gap", &reshard.GapError{Missing: []string{"ks/0"}}, "reshard_gap", "shards that no longer exist (ks/0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := newReceiver(t, func(int, *message, http.ResponseWriter) bool { return false })
			v := e.create(r.url(), nil)
			before := e.opens()
			e.log.addN(2, 1)
			e.log.end(tc.end)
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
			if !strings.HasPrefix(got.DisabledReason, tc.reason+": ") || !strings.Contains(got.DisabledReason, tc.text) {
				t.Errorf("disabled reason %q, want %s and the error", got.DisabledReason, tc.reason)
			}
			if n := e.opens() - before; n != 1 {
				t.Errorf("the stream was opened %d times to deliver, want once (no retry into the end)", n)
			}
		})
	}
}

// opens is how many feeds the webhook service opened so far.
func (e *env) opens() int {
	e.src.mu.Lock()
	defer e.src.mu.Unlock()
	return e.src.opens
}
