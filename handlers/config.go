package handlers

import (
	"errors"
	"fmt"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
)

// Each transport has a configuration of its own: what bounds a long-poll
// means nothing to a WebSocket, and a setting found in one place only is
// one whose effect can be read there. Each has its Default… (the values
// the gateway's flags default to) and a Validate that refuses what the
// handlers cannot work with; the server's flags are checked, with the
// flags' names, before these are made (server/config.go).

// ErrConfig wraps every error a transport configuration's Validate
// reports.
var ErrConfig = errors.New("handlers: invalid configuration")

// AdminConfig bounds the admin API (stream and subscriber management).
type AdminConfig struct {
	// MaxBodyBytes is the largest request body (413 body_too_large past
	// it). A body is read whole before it is checked, and a stream
	// definition is a few KiB: without a bound one request could make the
	// gateway hold any amount of memory.
	MaxBodyBytes int64
}

// DefaultAdminConfig allows 64 KiB bodies, room for a stream definition of
// many rules with filters.
func DefaultAdminConfig() AdminConfig { return AdminConfig{MaxBodyBytes: 64 << 10} }

// Validate refuses a body limit that would refuse every body.
func (c AdminConfig) Validate() error {
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("%w: AdminConfig.MaxBodyBytes must be positive, not %d", ErrConfig, c.MaxBodyBytes)
	}
	return nil
}

// PullConfig bounds GET /v1/streams/{stream}/changes (pull and long-poll).
type PullConfig struct {
	// MaxLimit caps the limit parameter, in events per page: a page is
	// built in memory and sent whole, so a client cannot ask for a
	// backlog at once.
	MaxLimit int
	// DefaultLimit is the page size when limit is absent.
	DefaultLimit int
	// MaxWait caps the wait parameter (the long-poll): how long one
	// request may hold a connection and a subscription waiting.
	MaxWait time.Duration
	// FirstWait is how long a request without wait waits for a new
	// VStream's first rows: a replay or a snapshot takes a moment to
	// start, and its first page should not be an empty one.
	FirstWait time.Duration
	// Cache makes pages that a shared cache may keep say so (DESIGN
	// §6.2): public Cache-Control, ETag. Off, every page is no-store: a
	// cache in front does not check tokens, and whoever holds a cached
	// page's URL can fetch it from there, so the operator opts in.
	Cache bool
	// CacheMaxAge is the max-age of a whole page (from a cursor, not at
	// the live end), whose events never change.
	CacheMaxAge time.Duration
	// LiveMaxAge is the max-age of a page at the live end, which a later
	// request would answer with more: short, so that a cache collapses
	// the pollers waiting on one cursor and soon asks again. It is also
	// how long the gateway keeps a collapsed page for the requests that
	// come just after it (Cache on).
	LiveMaxAge time.Duration
	// LiveLinger is how long a long-poll at the live end, once its first
	// transaction came, waits for more before it answers: the pages of
	// a busy stream then come at most every LiveLinger per cursor, which
	// is what bounds the requests a cache passes on. 0: at once.
	LiveLinger time.Duration
}

// DefaultPullConfig: pages of 1,000 events (at most 10,000), long-polls of
// up to a minute, and 2 s for a new VStream's first rows; no caching
// (whole pages would keep a week, live ones 5 s), no linger.
func DefaultPullConfig() PullConfig {
	return PullConfig{MaxLimit: 10000, DefaultLimit: 1000, MaxWait: 60 * time.Second, FirstWait: 2 * time.Second,
		CacheMaxAge: 7 * 24 * time.Hour, LiveMaxAge: 5 * time.Second}
}

// Validate refuses limits no page could meet and negative waits.
func (c PullConfig) Validate() error {
	switch {
	case c.MaxLimit < 1 || c.DefaultLimit < 1 || c.DefaultLimit > c.MaxLimit:
		return fmt.Errorf("%w: PullConfig.DefaultLimit (%d) and MaxLimit (%d) must be positive, default ≤ max", ErrConfig, c.DefaultLimit, c.MaxLimit)
	case c.MaxWait < 0 || c.FirstWait < 0:
		return fmt.Errorf("%w: PullConfig.MaxWait (%v) and FirstWait (%v) must not be negative", ErrConfig, c.MaxWait, c.FirstWait)
	case c.LiveLinger < 0 || c.LiveLinger > time.Minute:
		return fmt.Errorf("%w: PullConfig.LiveLinger (%v) must be within [0, 1m]", ErrConfig, c.LiveLinger)
	case c.Cache && (c.CacheMaxAge < time.Second || c.LiveMaxAge < time.Second):
		return fmt.Errorf("%w: PullConfig.CacheMaxAge (%v) and LiveMaxAge (%v) must be at least 1s with Cache on", ErrConfig, c.CacheMaxAge, c.LiveMaxAge)
	}
	return nil
}

// SSEConfig is the configuration of GET /v1/streams/{stream}/sse.
type SSEConfig struct {
	// CursorHeartbeat is how often an idle stream sends a heartbeat with
	// its moved cursor: position-only transactions (other tables, vtgate's
	// heartbeats) send nothing, and a client reconnecting from an old
	// cursor would replay them. Between changes it is all an idle stream
	// sends: SSE has no separate keep-alive.
	CursorHeartbeat time.Duration
}

// DefaultSSEConfig sends a cursor heartbeat every 5 s.
func DefaultSSEConfig() SSEConfig { return SSEConfig{CursorHeartbeat: 5 * time.Second} }

// Validate refuses a heartbeat interval of zero or less, which would send
// heartbeats without pause.
func (c SSEConfig) Validate() error {
	if c.CursorHeartbeat <= 0 {
		return fmt.Errorf("%w: SSEConfig.CursorHeartbeat must be positive, not %v", ErrConfig, c.CursorHeartbeat)
	}
	return nil
}

// WebSocketConfig is the configuration of GET /v1/streams/{stream}/ws: the
// frame layer's (read limit, keep-alive, give-up time) and the session's
// send queue and its slow-consumer policy.
type WebSocketConfig struct {
	wsconn.Config
	// Queue bounds the send queue in items (transactions and heartbeats),
	// and QueueBytes in bytes of events: a queue is full at either bound.
	// Items alone do not bound memory (one bulk transaction outweighs
	// hundreds of small ones); the queue holds memory only for what it
	// holds, so an idle connection costs none of it.
	Queue      int
	QueueBytes int
	// SlowAfter is how long the queue may stay full, or one write stay
	// blocked, before the client is closed as a slow consumer (4008): a
	// replaying client that reads steadily is throttled (the VStream
	// waits), only one that stops reading is cut off. Zero or less: a
	// full queue cuts the client off at once, and writes are not watched.
	SlowAfter time.Duration
	// CursorHeartbeat is how often an idle client is sent a heartbeat with
	// its moved cursor (see SSEConfig.CursorHeartbeat).
	CursorHeartbeat time.Duration
}

// minWSReadLimit is the smallest read limit a client can work with: an ack
// carries a cursor of up to 1 KiB.
const minWSReadLimit = 1 << 10

// DefaultWebSocketConfig: the frame layer's defaults, a queue of 4,096
// items or 4 MiB, 5 s before a client that stopped reading is cut off, and
// a cursor heartbeat every 5 s.
func DefaultWebSocketConfig() WebSocketConfig {
	return WebSocketConfig{
		Config:          wsconn.DefaultConfig(),
		Queue:           4096,
		QueueBytes:      4 << 20,
		SlowAfter:       5 * time.Second,
		CursorHeartbeat: 5 * time.Second,
	}
}

// Validate refuses what the frame layer refuses, a read limit too small
// for an ack, an empty queue, and a heartbeat interval of zero or less.
func (c WebSocketConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return fmt.Errorf("%w: WebSocketConfig: %w", ErrConfig, err)
	}
	switch {
	case c.ReadLimit < minWSReadLimit:
		return fmt.Errorf("%w: WebSocketConfig.ReadLimit must be at least %d (an ack carries a cursor of up to 1 KiB), not %d", ErrConfig, minWSReadLimit, c.ReadLimit)
	case c.Queue < 1 || c.QueueBytes < 1:
		return fmt.Errorf("%w: WebSocketConfig.Queue (%d) and QueueBytes (%d) must be positive", ErrConfig, c.Queue, c.QueueBytes)
	case c.CursorHeartbeat <= 0:
		return fmt.Errorf("%w: WebSocketConfig.CursorHeartbeat must be positive, not %v", ErrConfig, c.CursorHeartbeat)
	}
	return nil
}

// CheckConfig reports the first transport configuration of a that its
// handlers cannot serve with.
func (a *API) CheckConfig() error {
	for _, c := range []interface{ Validate() error }{a.AdminConfig, a.PullConfig, a.SSEConfig, a.WebSocketConfig} {
		if err := c.Validate(); err != nil {
			return err
		}
	}
	return nil
}
