package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// The ways a connection ends that are not failures of the gateway: each
// says what the next connection does differently.
var (
	// errTokenExpired: the gateway closed the connection at the token's
	// exp, or refused a refresh. The next connection asks for a fresh
	// token, at once.
	errTokenExpired = errors.New("the token expired")
	// errSlow: the gateway gave up on a reader that read too slowly
	// (WebSocket 4008). Resume from the cursor at once.
	errSlow = errors.New("the gateway closed a slow consumer")
	// errShutdown: the gateway is shutting down (WebSocket 4001).
	// Another replica (or the same, restarted) takes over: reconnect
	// after a short random wait.
	errShutdown = errors.New("the gateway is shutting down")
)

// shutdownJitter spreads the reconnects of the clients a gateway shutting
// down closed all at once.
const shutdownJitter = time.Second

// retryIn is a connection's end after which the next one starts after d
// (backoff.Retry's RetryAfterError), rather than after the backoff.
type retryIn struct {
	cause error
	after backoff.RetryAfterError
}

func (r *retryIn) Error() string   { return r.cause.Error() }
func (r *retryIn) Unwrap() []error { return []error{r.cause, &r.after} }

func now(cause error) error { return &retryIn{cause: cause} }

// run is the connection goroutine: one connection at a time, from the
// cursor after the last whole transaction received, until ctx ends or an
// error retrying cannot fix. It closes items when it returns.
func (c *Client) run(ctx context.Context) {
	defer close(c.ran)
	defer close(c.items)
	var st runState
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := c.connect(ctx, st.fresh)
		if ctx.Err() != nil {
			return struct{}{}, backoff.Permanent(ctx.Err())
		}
		return struct{}{}, c.after(err, &st)
	}, backoff.WithBackOff(c.bo), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, d time.Duration) {
		c.lastErr.Store(failure{err})
		c.log.Info("reconnecting", "after", d.Round(time.Millisecond), "cursor_kept", c.resume != "", "reason", err)
	}))
	if ctx.Err() == nil {
		c.err = err
		c.log.Error("the stream ended", "err", err)
	}
}

// runState is what one connection's end tells the next.
type runState struct {
	refused int  // consecutive 401s
	fresh   bool // ask the token source again, whatever the token's exp
}

// after decides what follows a connection's end: nil never (a connection
// only ends with a reason), backoff.Permanent for the end of the client,
// retryIn for a reconnect after a given wait, the error itself for a
// reconnect after the backoff.
func (c *Client) after(err error, st *runState) error {
	var e *Error
	st.fresh = false
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		st.refused = 0
	}
	switch {
	case errors.Is(err, errTokenExpired):
		st.fresh = true
		return now(err)
	case errors.Is(err, errSlow):
		return now(err)
	case errors.Is(err, errShutdown):
		return &retryIn{cause: err, after: backoff.RetryAfterError{Duration: rand.N(shutdownJitter)}}
	case errors.As(err, &e) && e.Code == "spool_gone" && c.o.subscriber != "":
		// The subscriber's bridge spool was freed under the reader; its
		// stored cursor is past it: read on from there.
		c.resume = ""
		return now(err)
	case errors.As(err, &e) && e.Status == http.StatusUnauthorized:
		st.refused++
		if st.refused > 1 || c.tokens.src == nil {
			return backoff.Permanent(err)
		}
		st.fresh = true
		return now(err)
	case errors.As(err, &e) && e.retryable():
		if e.RetryAfter > 0 {
			return &retryIn{cause: err, after: backoff.RetryAfterError{Duration: e.RetryAfter}}
		}
		return err
	case errors.As(err, &e):
		return backoff.Permanent(err)
	}
	return err
}

// connect runs one connection of the chosen transport; it returns why
// the connection ended.
func (c *Client) connect(ctx context.Context, freshToken bool) error {
	tok, err := c.tokens.get(ctx, freshToken)
	if err != nil {
		return err
	}
	if c.o.transport == Poll {
		return c.poll(ctx, tok, false)
	}
	if c.resume == "" {
		if err := c.poll(ctx, tok, true); err != nil {
			return err
		}
	}
	if c.o.transport == SSE {
		return c.sse(ctx, tok)
	}
	return c.websocket(ctx, tok)
}

// startQuery is the query that opens a connection where the client is.
func (c *Client) startQuery() url.Values {
	q := url.Values{}
	if c.resume != "" {
		q.Set("cursor", c.resume)
	} else if c.o.start != "" {
		q.Set("start", c.o.start)
	}
	if c.o.subscriber != "" {
		q.Set("subscriber", c.o.subscriber)
	}
	return q
}

// opened tells Dial that a connection is open.
func (c *Client) opened() { c.openOnce.Do(func() { close(c.connected) }) }

// deliver queues a whole transaction for the application; it blocks while
// the queue is full. The next connection resumes after it.
func (c *Client) deliver(ctx context.Context, t *Txn) error {
	c.seq++
	t.seq = c.seq
	select {
	case c.items <- item{txn: t}:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.resume = t.Cursor
	c.bo.progressed()
	return nil
}

// moveTo queues a position the stream reached without a transaction.
func (c *Client) moveTo(ctx context.Context, cursor string) error {
	if cursor == "" || cursor == c.resume || inside(cursor) {
		return nil
	}
	select {
	case c.items <- item{cursor: cursor}:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.resume = cursor
	c.bo.progressed()
	return nil
}
