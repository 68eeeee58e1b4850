package client

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"time"
)

// Transport is how a Client reads the stream.
type Transport int

const (
	// WebSocket: /ws with arrays of a transaction's events (batch=txn); acks
	// go over the connection. The default.
	WebSocket Transport = iota
	// SSE: /sse, Server-Sent Events; acks are HTTP POSTs.
	SSE
	// Poll: /changes, HTTP long-polling; acks are HTTP POSTs.
	Poll
)

func (t Transport) String() string {
	switch t {
	case WebSocket:
		return "ws"
	case SSE:
		return "sse"
	case Poll:
		return "poll"
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// TokenSource returns the bearer token to present. It is called before
// the first connection, again when the token it gave is about to expire
// (its JWT exp), and when the gateway refused it (401, or a WebSocket
// closed at the token's expiry).
type TokenSource func(ctx context.Context) (string, error)

// StaticToken is a TokenSource that always returns token.
func StaticToken(token string) TokenSource {
	return func(context.Context) (string, error) { return token, nil }
}

// Defaults of a Client without options:
//   - transport: WebSocket
//   - no token (a gateway run with --insecure-no-auth), anonymous reader
//   - cursor store: a MemoryStore; start: the stream's own start (or
//     the subscriber's stored cursor)
//   - commit: a transaction is committed when Next is called again
//   - queue: 64 transactions received ahead of the application
//   - acks: at most one per 250 ms, the newest
//   - reconnects: full-jitter backoff from 0.5 s up to 20 s
//   - poll: wait 30 s, limit 1000 events
//   - idle timeout: 30 s without a byte from the gateway (it sends a
//     heartbeat every 5 s) ends a connection
//   - logger: slog.Default(); HTTP client: a client of its own on
//     http.DefaultTransport.
const (
	defaultQueue       = 64
	defaultAckInterval = 250 * time.Millisecond
	defaultBackoffMin  = 500 * time.Millisecond
	defaultBackoffMax  = 20 * time.Second
	defaultPollWait    = 30 * time.Second
	defaultPollLimit   = 1000
	defaultIdleTimeout = 30 * time.Second
)

// Option configures a Client; it reports a value it cannot take.
type Option func(*options) error

type options struct {
	transport   Transport
	subscriber  string
	token       TokenSource
	store       CursorStore
	cursor      string
	start       string
	manual      bool
	onResync    func(context.Context, *Resync) error
	queue       int
	ackInterval time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	pollWait    time.Duration
	pollLimit   int
	idleTimeout time.Duration
	http        *http.Client
	log         *slog.Logger
}

func defaults() options {
	return options{
		store: &MemoryStore{}, queue: defaultQueue, ackInterval: defaultAckInterval,
		backoffMin: defaultBackoffMin, backoffMax: defaultBackoffMax,
		pollWait: defaultPollWait, pollLimit: defaultPollLimit, idleTimeout: defaultIdleTimeout,
		http: &http.Client{Transport: http.DefaultTransport}, log: slog.Default(),
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOption, fmt.Sprintf(format, args...))
}

// name is a stream or subscriber name (openapi.yaml, Name).
var name = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// WithTransport chooses WebSocket (the default), SSE or Poll.
func WithTransport(t Transport) Option {
	return func(o *options) error {
		if t < WebSocket || t > Poll {
			return invalid("transport %v", t)
		}
		o.transport = t
		return nil
	}
}

// WithSubscriber reads as a named subscriber: the gateway stores its
// cursor when it acks, and a reader without a cursor of its own starts
// from it. Commits ack (see Client.Commit).
func WithSubscriber(subscriber string) Option {
	return func(o *options) error {
		if !name.MatchString(subscriber) {
			return invalid("subscriber %q is not a valid name", subscriber)
		}
		o.subscriber = subscriber
		return nil
	}
}

// WithToken sets where bearer tokens come from (default none).
func WithToken(ts TokenSource) Option {
	return func(o *options) error {
		if ts == nil {
			return invalid("nil token source")
		}
		o.token = ts
		return nil
	}
}

// WithCursorStore keeps the committed cursor in s (default a
// MemoryStore, which a new process starts without).
func WithCursorStore(s CursorStore) Option {
	return func(o *options) error {
		if s == nil {
			return invalid("nil cursor store")
		}
		o.store = s
		return nil
	}
}

// WithCursor starts right after the transaction of cursor, whatever the
// cursor store holds.
func WithCursor(cursor string) Option {
	return func(o *options) error {
		if len(cursor) > 1024 {
			return invalid("cursor of %d bytes: cursors have at most 1024", len(cursor))
		}
		o.cursor = cursor
		return nil
	}
}

// WithStart says where a reader without any cursor (given, stored
// locally, or stored for its subscriber) starts: "now" or "snapshot".
// Default: the stream's start.
func WithStart(start string) Option {
	return func(o *options) error {
		if start != "now" && start != "snapshot" {
			return invalid("start %q: now or snapshot", start)
		}
		o.start = start
		return nil
	}
}

// WithManualCommit leaves committing to Client.Commit: Next no longer
// commits the transaction before the one it returns.
func WithManualCommit() Option {
	return func(o *options) error { o.manual = true; return nil }
}

// WithOnResync calls f when Next reaches a transaction holding a Resync
// event, before the transaction is returned: the place to discard what
// the application derived from earlier events (a fresh snapshot
// follows). An error from f is returned by Next, and the same
// transaction is tried again by the next call.
func WithOnResync(f func(context.Context, *Resync) error) Option {
	return func(o *options) error {
		if f == nil {
			return invalid("nil resync hook")
		}
		o.onResync = f
		return nil
	}
}

// WithQueue bounds the transactions received ahead of the application
// (default 64). While it is full the client reads nothing more; a
// gateway that gave up on it (WebSocket 4008 slow_consumer) is read
// again from the cursor.
func WithQueue(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return invalid("queue %d: at least 1", n)
		}
		o.queue = n
		return nil
	}
}

// WithAckInterval sets the least time between two acks (default 250 ms):
// each one is a store write on the gateway, and only the newest matters.
func WithAckInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalid("ack interval %v: negative", d)
		}
		o.ackInterval = d
		return nil
	}
}

// WithBackoff sets the reconnect backoff: full jitter, the cap doubling
// from lo up to hi (default 0.5 s to 20 s).
func WithBackoff(lo, hi time.Duration) Option {
	return func(o *options) error {
		if lo <= 0 || hi < lo {
			return invalid("backoff %v to %v: want 0 < lo <= hi", lo, hi)
		}
		o.backoffMin, o.backoffMax = lo, hi
		return nil
	}
}

// WithPoll sets the Poll transport's long-poll wait (default 30 s, at
// most 60 s) and events per page (default 1000).
func WithPoll(wait time.Duration, limit int) Option {
	return func(o *options) error {
		if wait < 0 || wait > time.Minute || limit < 1 {
			return invalid("poll wait %v, limit %d: want 0 <= wait <= 1m, limit >= 1", wait, limit)
		}
		o.pollWait, o.pollLimit = wait, limit
		return nil
	}
}

// WithIdleTimeout ends a WebSocket or SSE connection on which nothing
// arrived for d (default 30 s; the gateway sends a heartbeat every 5 s
// when idle), and reconnects: a connection a network failure cut without
// closing it would otherwise wait forever.
func WithIdleTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("idle timeout %v: must be positive", d)
		}
		o.idleTimeout = d
		return nil
	}
}

// WithHTTPClient sets the HTTP client of every request (its Timeout must
// be 0: streams stay open).
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) error {
		if c == nil || c.Timeout != 0 {
			return invalid("HTTP client: must be non-nil, without a Timeout")
		}
		o.http = c
		return nil
	}
}

// WithLogger sets the logger; the client adds the stream, subscriber and
// transport to every line.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return invalid("nil logger")
		}
		o.log = l
		return nil
	}
}
