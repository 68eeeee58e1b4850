package server

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// Limiter enforces per-caller limits. Callers are told apart by
// auth.Principal.Key: the token subject (the remote host without auth), so
// a client cannot escape a limit by refreshing its token.
type Limiter struct {
	maxConns   int
	adminRate  rate.Limit
	adminBurst int
	now        func() time.Time

	mu        sync.Mutex
	idle      *sync.Cond // signalled when active drops to 0
	active    int        // streaming handlers running
	conns     map[string]int
	admin     map[string]*bucket
	lastPrune time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// newLimiter returns the limits of cfg.
func newLimiter(cfg *Config) *Limiter {
	l := &Limiter{
		maxConns:   cfg.MaxConnsPerToken,
		adminRate:  rate.Limit(cfg.AdminRate),
		adminBurst: cfg.AdminBurst,
		now:        time.Now,
		conns:      map[string]int{},
		admin:      map[string]*bucket{},
	}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// wait returns when no streaming handler runs any more, or ctx ends.
func (l *Limiter) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		l.mu.Lock()
		for l.active > 0 && ctx.Err() == nil {
			l.idle.Wait()
		}
		l.mu.Unlock()
		close(done)
	}()
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.idle.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	select {
	case <-done:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// defaultLimiter is used when the server was assembled without a config
// (tests): the flag defaults.
func defaultLimiter() *Limiter {
	return newLimiter(&Config{MaxConnsPerToken: 32, AdminRate: 5, AdminBurst: 20})
}

// tooMany writes a 429 with Retry-After in whole seconds (at least 1).
func tooMany(w http.ResponseWriter, reason, msg string, after time.Duration) {
	metrics.Refused(reason)
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Max(1, math.Ceil(after.Seconds())))))
	handlers.WriteError(w, nil, &handlers.Error{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: msg})
}

// adminRate limits the admin API per caller with a token bucket.
func (l *Limiter) adminRateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := "?"
		if p := principal(r); p != nil {
			key = p.Key()
		}
		now := l.now()
		l.mu.Lock()
		b := l.admin[key]
		if b == nil {
			b = &bucket{lim: rate.NewLimiter(l.adminRate, l.adminBurst)}
			l.admin[key] = b
		}
		b.seen = now
		res := b.lim.ReserveN(now, 1)
		delay := res.DelayFrom(now)
		if delay > 0 {
			res.CancelAt(now) // a refused request does not consume a token
		}
		l.prune(now)
		l.mu.Unlock()
		if delay > 0 {
			tooMany(w, "rate_limited", "too many admin API requests; retry later", delay)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// prune forgets callers idle for ten minutes (their bucket is full again
// by then), at most once a minute. Called with mu held.
func (l *Limiter) prune(now time.Time) {
	if now.Sub(l.lastPrune) < time.Minute {
		return
	}
	l.lastPrune = now
	for k, b := range l.admin {
		if now.Sub(b.seen) > 10*time.Minute {
			delete(l.admin, k)
		}
	}
}

// streaming counts a transport's connection for its caller, refusing it
// past the per-caller maximum, and keeps the clients gauge.
func (l *Limiter) streaming(transport string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := "?"
			if p := principal(r); p != nil {
				key = p.Key()
			}
			l.mu.Lock()
			if l.maxConns > 0 && l.conns[key] >= l.maxConns {
				l.mu.Unlock()
				tooMany(w, "too_many_connections", "too many concurrent connections for this token ("+strconv.Itoa(l.maxConns)+"); close one first", 5*time.Second)
				return
			}
			l.conns[key]++
			l.active++
			l.mu.Unlock()
			done := metrics.ClientConnected(chi.URLParam(r, "stream"), transport)
			// The connection counts until it ends, which for a WebSocket
			// is after the handler returned (handlers.Track).
			r, returned := handlers.Track(r, func() {
				done()
				l.mu.Lock()
				if l.conns[key]--; l.conns[key] <= 0 {
					delete(l.conns, key)
				}
				if l.active--; l.active == 0 {
					l.idle.Broadcast()
				}
				l.mu.Unlock()
			})
			defer returned()
			next.ServeHTTP(w, r)
		})
	}
}
