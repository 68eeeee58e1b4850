package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client reads one stream: whole transactions, in commit order, each
// once, across reconnects, gateway restarts and reshards. One goroutine
// calls Next (or ranges over Transactions); Commit, Ack, Cursor and
// Close may be called from any.
type Client struct {
	base   string // the gateway's URL, without a trailing slash
	stream string
	o      options
	log    *slog.Logger
	tokens *tokens
	acks   *acker
	bo     *fullJitter

	// items carries what the connection goroutine received, in order:
	// whole transactions, and positions without one (heartbeats).
	items chan item
	// head is an item taken from items but not handed over yet (its
	// resync hook failed).
	head *item
	// connected is closed once the first connection is open; ran once
	// the connection goroutine has ended, with err why (nil after Close).
	connected chan struct{}
	openOnce  sync.Once
	ran       chan struct{}
	err       error
	// stop ends the connection goroutine and the acker; closed is
	// closed by Close.
	// lastErr is why the last connection ended (an error), for a Dial
	// that gives up.
	lastErr   atomic.Value
	stop      context.CancelFunc
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	ackerDone chan struct{}

	// resume is where the next connection starts: the cursor after the
	// last whole transaction received (the connection goroutine's own).
	resume string
	seq    uint64
	// dec decodes what the connections read, and body holds a pull page
	// (the connection goroutine's own).
	dec  decoder
	body bytes.Buffer

	mu        sync.Mutex // guards what follows, and orders Saves
	handed    *Txn       // handed to the application, not committed
	lastSeq   uint64     // seq of the last transaction committed
	committed string     // the last cursor committed
	later     string     // a position received after handed, committed with it
}

// failure wraps an error for an atomic.Value, which takes one concrete
// type only.
type failure struct{ err error }

// item is a whole transaction, or a position the stream moved to without
// one (a heartbeat, a page whose rows the token's scope withheld).
type item struct {
	txn    *Txn
	cursor string
}

// Dial opens a client of stream on the gateway at baseURL (such as
// "https://gateway.example.com") and returns once its first connection
// is open. A refusal that retrying cannot fix (an unknown stream, a bad
// cursor, a token refused twice) is returned as an *Error; connection
// failures are retried with backoff until ctx ends. ctx bounds Dial
// only: the client reads until Close.
func Dial(ctx context.Context, baseURL, stream string, opts ...Option) (*Client, error) {
	o := defaults()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalid("base URL %q: want http(s)://host[:port][/prefix]", baseURL)
	}
	if !name.MatchString(stream) {
		return nil, invalid("stream %q is not a valid name", stream)
	}
	c := &Client{
		base: strings.TrimRight(baseURL, "/"), stream: stream, o: o,
		log:    o.log.With("stream", stream, "subscriber", o.subscriber, "transport", o.transport.String()),
		tokens: &tokens{src: o.token}, bo: newFullJitter(o.backoffMin, o.backoffMax),
		items: make(chan item, o.queue), connected: make(chan struct{}), ran: make(chan struct{}),
		closed: make(chan struct{}), ackerDone: make(chan struct{}),
	}
	c.acks = newAcker(c)
	c.resume = o.cursor
	if c.resume == "" {
		if c.resume, err = o.store.Load(ctx); err != nil {
			return nil, fmt.Errorf("load cursor: %w", err)
		}
	}
	c.committed = c.resume
	runCtx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go func() { defer close(c.ackerDone); c.acks.run(runCtx) }()
	go c.run(runCtx)
	select {
	case <-c.connected:
		return c, nil
	case <-c.ran:
		err = c.err
	case <-ctx.Done():
		err = ctx.Err()
		if last, ok := c.lastErr.Load().(failure); ok {
			err = fmt.Errorf("%w (the last attempt: %v)", err, last.err)
		}
	}
	c.Close()
	return nil, err
}

// endpoint is the URL of the stream's path (under /v1/streams/{stream}/).
func (c *Client) endpoint(path string, q url.Values) string {
	u := c.base + "/v1/streams/" + url.PathEscape(c.stream) + "/" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func (c *Client) authorize(h http.Header, token string) {
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
}

// Next returns the next whole transaction. Unless the client was dialled
// WithManualCommit, it first commits the transaction it returned before.
// It returns ErrClosed once Close was called, and the error that ended
// the client (an *Error) once every transaction received before it was
// returned.
func (c *Client) Next(ctx context.Context) (*Txn, error) {
	if !c.o.manual {
		if err := c.commitHanded(ctx); err != nil {
			return nil, err
		}
	}
	for {
		it, err := c.take(ctx)
		if err != nil {
			return nil, err
		}
		if it.txn == nil {
			if err := c.position(ctx, it.cursor); err != nil {
				return nil, err
			}
			continue
		}
		if err := c.resynced(ctx, it); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.handed, c.later = it.txn, ""
		c.mu.Unlock()
		return it.txn, nil
	}
}

// take returns the next item received.
func (c *Client) take(ctx context.Context) (item, error) {
	if c.head != nil {
		it := *c.head
		c.head = nil
		return it, nil
	}
	select {
	case <-c.closed:
		return item{}, ErrClosed
	default:
	}
	select {
	case it, ok := <-c.items:
		if ok {
			return it, nil
		}
		if c.err != nil {
			return item{}, c.err
		}
		return item{}, ErrClosed
	case <-c.closed:
		return item{}, ErrClosed
	case <-ctx.Done():
		return item{}, ctx.Err()
	}
}

// resynced calls the resync hook for a transaction holding a Resync
// event; on failure the transaction is kept for the next Next.
func (c *Client) resynced(ctx context.Context, it item) error {
	if c.o.onResync == nil {
		return nil
	}
	for _, e := range it.txn.Events {
		if r, ok := e.(*Resync); ok {
			if err := c.o.onResync(ctx, r); err != nil {
				c.head = &it
				return fmt.Errorf("resync hook: %w", err)
			}
		}
	}
	return nil
}

// Transactions ranges over the stream's transactions (see Next), until
// ctx ends, the client is closed, or it fails: then the error is yielded
// once and the sequence ends (not after Close). Breaking out of the loop
// does not commit the transaction the loop body was given.
func (c *Client) Transactions(ctx context.Context) iter.Seq2[*Txn, error] {
	return func(yield func(*Txn, error) bool) {
		for {
			txn, err := c.Next(ctx)
			if errors.Is(err, ErrClosed) {
				return
			}
			if !yield(txn, err) || err != nil {
				return
			}
		}
	}
}

// Commit records that the application is done with txn and every
// transaction before it: the cursor store saves txn's cursor and, for a
// named subscriber, it is acked. Committing a transaction older than the
// last one committed does nothing.
func (c *Client) Commit(ctx context.Context, txn *Txn) error {
	if txn == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if txn.seq <= c.lastSeq {
		return nil
	}
	cursor := txn.Cursor
	if txn == c.handed {
		if c.later != "" {
			cursor = c.later // the stream moved on past it without a transaction
		}
		c.handed, c.later = nil, ""
	}
	if err := c.saveLocked(ctx, cursor); err != nil {
		return err
	}
	c.lastSeq = txn.seq
	return nil
}

// commitHanded commits the transaction Next returned last.
func (c *Client) commitHanded(ctx context.Context) error {
	c.mu.Lock()
	txn := c.handed
	c.mu.Unlock()
	return c.Commit(ctx, txn)
}

// position commits a cursor received without a transaction, unless a
// transaction handed over before it is not committed yet: it is then
// committed with that transaction.
func (c *Client) position(ctx context.Context, cursor string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handed != nil {
		c.later = cursor
		return nil
	}
	return c.saveLocked(ctx, cursor)
}

func (c *Client) saveLocked(ctx context.Context, cursor string) error {
	if cursor == "" || cursor == c.committed {
		return nil
	}
	if err := c.o.store.Save(ctx, cursor); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	c.committed = cursor
	if c.o.subscriber != "" {
		c.acks.offer(cursor)
	}
	return nil
}

// Ack confirms to the gateway that the named subscriber processed
// everything up to cursor, without saving it in the cursor store. Acks
// are coalesced: the newest goes out within the ack interval. Commit
// acks by itself; Ack is for an application that keeps its cursors
// elsewhere.
func (c *Client) Ack(cursor string) {
	if c.o.subscriber != "" {
		c.acks.offer(cursor)
	}
}

// Cursor is the last cursor committed: where a new client with this
// cursor store would start.
func (c *Client) Cursor() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committed
}

// closeAckTimeout bounds the last ack Close posts.
const closeAckTimeout = 5 * time.Second

// Close ends the connection and, for a named subscriber, posts the last
// ack over HTTP unless one already stored it. The transaction Next
// returned last is not committed (Commit it first if it is done).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.stop()
		<-c.ran
		<-c.ackerDone
		if c.o.subscriber == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), closeAckTimeout)
		defer cancel()
		if err := c.acks.flush(ctx); err != nil {
			c.closeErr = fmt.Errorf("last ack: %w", err)
		}
	})
	return c.closeErr
}
