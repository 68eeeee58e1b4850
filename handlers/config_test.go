package handlers

import (
	"errors"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
)

// Each transport's defaults are valid, and each setting its handlers
// cannot work with is refused with ErrConfig.
func TestTransportConfigsValidate(t *testing.T) {
	defaults := func() *API {
		return &API{AdminConfig: DefaultAdminConfig(), PullConfig: DefaultPullConfig(),
			SSEConfig: DefaultSSEConfig(), WebSocketConfig: DefaultWebSocketConfig()}
	}
	if err := defaults().CheckConfig(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for name, edit := range map[string]func(*API){
		"no admin body":          func(a *API) { a.AdminConfig.MaxBodyBytes = 0 },
		"no page":                func(a *API) { a.PullConfig.MaxLimit = 0 },
		"default past max":       func(a *API) { a.PullConfig.DefaultLimit = a.PullConfig.MaxLimit + 1 },
		"negative wait":          func(a *API) { a.PullConfig.MaxWait = -1 },
		"negative first wait":    func(a *API) { a.PullConfig.FirstWait = -1 },
		"no SSE heartbeat":       func(a *API) { a.SSEConfig.CursorHeartbeat = 0 },
		"no ws keep-alive":       func(a *API) { a.WebSocketConfig.KeepAlive = 0 },
		"ws read limit < an ack": func(a *API) { a.WebSocketConfig.ReadLimit = 1000 },
		"no ws queue":            func(a *API) { a.WebSocketConfig.Queue = 0 },
		"no ws queue bytes":      func(a *API) { a.WebSocketConfig.QueueBytes = 0 },
		"no ws heartbeat":        func(a *API) { a.WebSocketConfig.CursorHeartbeat = -1 },
	} {
		a := defaults()
		edit(a)
		if err := a.CheckConfig(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: CheckConfig = %v, want ErrConfig", name, err)
		}
	}
	// The frame layer's refusal is the handlers' too, and says whose.
	ws := DefaultWebSocketConfig()
	ws.GiveUp = 0
	if err := ws.Validate(); !errors.Is(err, ErrConfig) || !errors.Is(err, wsconn.ErrConfig) {
		t.Errorf("a zero give-up: %v, want ErrConfig and wsconn.ErrConfig", err)
	}
	// A slow-after of zero is a policy (cut off at once), not an error.
	ws = DefaultWebSocketConfig()
	ws.SlowAfter = 0
	if err := ws.Validate(); err != nil {
		t.Errorf("a zero slow-after: %v", err)
	}
}
