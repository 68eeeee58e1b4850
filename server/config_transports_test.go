package server

import (
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/handlers"
)

// The flags' defaults are the transports' defaults: a gateway started
// without limit flags serves with handlers' Default… configurations.
func TestTransportConfigDefaults(t *testing.T) {
	c, err := ParseFlags([]string{"--insecure-no-auth"}, env())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.adminConfig(), handlers.DefaultAdminConfig(); got != want {
		t.Errorf("admin: %+v, want %+v", got, want)
	}
	if got, want := c.pullConfig(), handlers.DefaultPullConfig(); got != want {
		t.Errorf("pull: %+v, want %+v", got, want)
	}
	if got, want := c.sseConfig(), handlers.DefaultSSEConfig(); got != want {
		t.Errorf("SSE: %+v, want %+v", got, want)
	}
	if got, want := c.webSocketConfig(), handlers.DefaultWebSocketConfig(); got != want {
		t.Errorf("WebSocket: %+v, want %+v", got, want)
	}
}

// Each limit flag reaches its transport's configuration, and a
// configuration the flags accept is one the handlers accept.
func TestTransportConfigFromFlags(t *testing.T) {
	c, err := ParseFlags([]string{"--insecure-no-auth", "--max-body-bytes", "2048", "--max-limit", "50",
		"--default-limit", "7", "--max-wait", "3s", "--ws-read-limit", "1024", "--ws-queue", "9",
		"--ws-queue-bytes", "4096", "--ws-slow-after", "0"}, env())
	if err != nil {
		t.Fatal(err)
	}
	if a := c.adminConfig(); a.MaxBodyBytes != 2048 {
		t.Errorf("admin: %+v", a)
	}
	if p := c.pullConfig(); p.MaxLimit != 50 || p.DefaultLimit != 7 || p.MaxWait != 3*time.Second ||
		p.FirstWait != handlers.DefaultPullConfig().FirstWait {
		t.Errorf("pull: %+v", p)
	}
	w := c.webSocketConfig()
	if w.ReadLimit != 1024 || w.Queue != 9 || w.QueueBytes != 4096 || w.SlowAfter != 0 ||
		w.KeepAlive != handlers.DefaultWebSocketConfig().KeepAlive {
		t.Errorf("WebSocket: %+v", w)
	}
	a := &handlers.API{AdminConfig: c.adminConfig(), PullConfig: c.pullConfig(), SSEConfig: c.sseConfig(), WebSocketConfig: w}
	if err := a.CheckConfig(); err != nil {
		t.Errorf("the handlers refuse what the flags accept: %v", err)
	}
}
