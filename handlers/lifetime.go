package handlers

import (
	"context"
	"net/http"
	"sync"
)

// A streaming connection is counted (per token, in the clients gauge, by
// the graceful shutdown) from when its handler starts until it ends. For
// SSE and pulls that is the handler's return. A WebSocket outlives its
// handler: once the connection is upgraded, the session runs in goroutines
// of its own and the handler returns (DESIGN §6.1), so that net/http's
// per-request state (the response's buffers, the request, the goroutine's
// stack grown under the middleware) is freed while the connection idles.
// The middleware that counts connections tracks the request's lifetime
// (Track) and the WebSocket handler extends it to the session's end.

type lifetimeKey struct{}

// lifetime ends when its last holder releases it: the handler's return,
// and each extension.
type lifetime struct {
	mu   sync.Mutex
	refs int
	end  func()
}

func (l *lifetime) release() {
	l.mu.Lock()
	l.refs--
	last := l.refs == 0
	l.mu.Unlock()
	if last {
		l.end()
	}
}

// Track returns r carrying a lifetime that ends when both the handler has
// returned (the middleware calls returned, once, after the handler) and
// every extension the handler made has been released; end runs then, once.
func Track(r *http.Request, end func()) (_ *http.Request, returned func()) {
	l := &lifetime{refs: 1, end: end}
	return r.WithContext(context.WithValue(r.Context(), lifetimeKey{}, l)), l.release
}

// extend keeps the lifetime of r's connection going after its handler
// returns, until release is called. Without a tracked lifetime (a handler
// served without the middleware) it does nothing.
func extend(r *http.Request) (release func()) {
	l, _ := r.Context().Value(lifetimeKey{}).(*lifetime)
	if l == nil {
		return func() {}
	}
	l.mu.Lock()
	l.refs++
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(l.release) }
}
