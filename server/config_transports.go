package server

import "github.com/vstream-gateway/vstream-gateway/handlers"

// Each transport's configuration is its Default… with what the flags set:
// the flags default to those values (TestTransportConfigDefaults checks the wiring),
// and what has no flag keeps its default.

// adminConfig is the admin API's configuration (--max-body-bytes).
func (c *Config) adminConfig() handlers.AdminConfig {
	a := handlers.DefaultAdminConfig()
	a.MaxBodyBytes = c.MaxBodyBytes
	return a
}

// pullConfig is the pull endpoint's configuration (--max-limit,
// --default-limit, --max-wait, --pull-cache, --pull-cache-max-age,
// --pull-live-max-age, --pull-live-linger).
func (c *Config) pullConfig() handlers.PullConfig {
	p := handlers.DefaultPullConfig()
	p.MaxLimit, p.DefaultLimit, p.MaxWait = c.MaxLimit, c.DefaultLimit, c.MaxWait
	p.Cache, p.CacheMaxAge, p.LiveMaxAge, p.LiveLinger = c.PullCache, c.PullCacheMaxAge, c.PullLiveMaxAge, c.PullLiveLinger
	return p
}

// sseConfig is the SSE endpoint's configuration: no flag sets it.
func (c *Config) sseConfig() handlers.SSEConfig { return handlers.DefaultSSEConfig() }

// webSocketConfig is the WebSocket endpoint's configuration
// (--ws-read-limit, --ws-queue, --ws-queue-bytes, --ws-slow-after).
func (c *Config) webSocketConfig() handlers.WebSocketConfig {
	w := handlers.DefaultWebSocketConfig()
	w.ReadLimit = c.WSReadLimit
	w.Queue, w.QueueBytes = c.WSQueue, c.WSQueueBytes
	w.SlowAfter = c.WSSlowAfter
	return w
}
