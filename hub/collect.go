package hub

import (
	"context"
	"errors"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// Feed is an ordered view of a stream, one whole transaction at a time:
// what *Subscription provides. Transports may wrap it (a pull request
// applies its token's table scope as it reads).
type Feed interface {
	// Next blocks for the next transaction.
	Next(ctx context.Context) (*Delivery, error)
	// TryNext returns a transaction only if one is ready now.
	TryNext(ctx context.Context) (*Delivery, bool, error)
}

// Batch receives what Collect reads, whole transactions in order. The
// batch encodes them; the collector only decides where a batch ends.
type Batch interface {
	// Add takes one transaction. Position-only ones (no events: the
	// filter dropped their rows) are passed too, because they move the
	// position a batch ends at; heartbeats are not.
	Add(d *Delivery)
}

// Limits bound one batch; zero means unbounded. They are given per call,
// so that a consumer whose settings change (a webhook's batch_max_events)
// applies them from its next batch.
type Limits struct {
	// Events bounds the events of a batch, Bytes their size (the encoded
	// events, Event.JSON, without cursors or separators).
	Events int
	Bytes  int
	// Linger is how long Collect, once a batch has its first events,
	// waits for more transactions to fill it; 0 takes only what is ready.
	Linger time.Duration
}

// full reports whether a batch has reached a limit.
func (l Limits) full(c *Collected) bool {
	return l.Events > 0 && c.Events >= l.Events || l.Bytes > 0 && c.Bytes >= l.Bytes
}

// over reports whether a transaction of events and bytes would take a
// batch past a limit. An empty batch takes any transaction: transactions
// are never split, so one larger than the limits is a batch of its own.
func (l Limits) over(c *Collected, events, bytes int) bool {
	if c.Events == 0 {
		return false
	}
	return l.Events > 0 && c.Events+events > l.Events || l.Bytes > 0 && c.Bytes+bytes > l.Bytes
}

// Collected describes a batch Collect made.
type Collected struct {
	Events int
	Bytes  int
	// Cursor is the cursor after the last transaction added: the batch
	// ends at a transaction boundary, and a reader resumes from it. Empty
	// if Collect added none.
	Cursor string
	// Drained: the batch ended because nothing more was ready (or came
	// within Limits.Linger), not at a limit or on a failure.
	Drained bool
	// TimedOut: the wait for a first transaction with events ran out
	// (FirstWait).
	TimedOut bool
	// Part numbers, from 1, the batches of one chunked transaction that
	// SplitTxns cut to the limits (0: a batch of whole transactions).
	// Partial: more of the transaction follows; Cursor is empty.
	Part    int
	Partial bool
}

// ErrWaitOver is what Next returns when its wait for a transaction with
// events ended (FirstWait, WaitWhile) before one came.
var ErrWaitOver = errors.New("hub: the wait for a transaction with events is over")

// Collector reads a feed in batches of whole transactions, for the
// transports that take a stream a batch at a time (pull pages, webhook
// calls) or a transaction at a time as it comes (SSE, WebSocket). A batch
// starts with the first transaction carrying events — waiting for it as
// long as the options say — and takes the transactions after it that are
// ready, or come within Limits.Linger, while they fit in the limits.
//
// A Collector is not safe for concurrent use. Between batches it may hold
// a transaction it read that did not fit, and a feed error it met after
// reading some of a batch: the batch is returned, and the error with the
// next call.
type Collector struct {
	feed Feed

	idleEvery  time.Duration
	onIdle     func(ctx context.Context) error
	firstWait  time.Duration
	boundWait  bool // firstWait applies
	waitWhile  func() bool
	noHoldBack bool

	held *Delivery
	err  error

	// split: chunked transactions are cut to the limits (SplitTxns);
	// part counts the batches of the current one. inside: the last
	// transaction added to a batch of whole transactions is a chunked
	// one not yet complete.
	split  bool
	part   int
	inside bool
	// endInside: a batch may end inside a chunked transaction (EndInside).
	endInside bool
	// before is the position before the chunked transaction being cut
	// (its Partial pieces carry it): a part cut from its last piece
	// carries it too, not the position after the transaction, which
	// only the last part may (it is what a webhook acknowledges).
	before *binlogdatapb.VGtid
}

// CollectOption configures a Collector.
type CollectOption func(*Collector)

// OnIdle runs fn whenever every passes, while the collector waits for a
// transaction with events, without one: counted from the start of the
// wait and from fn's previous run. Push transports send a heartbeat from
// it, webhooks store the position of rows their filter dropped. An error
// from fn ends the wait with that error.
func OnIdle(every time.Duration, fn func(ctx context.Context) error) CollectOption {
	return func(c *Collector) { c.idleEvery, c.onIdle = every, fn }
}

// FirstWait bounds the wait for a batch's first transaction with events:
// once d has passed, Collect goes on with what is ready and reports
// TimedOut. Without it the wait lasts until the context ends.
func FirstWait(d time.Duration) CollectOption {
	return func(c *Collector) { c.firstWait, c.boundWait = d, true }
}

// WaitWhile makes the collector wait for a first transaction with events
// only while f reports true, asked before it waits and after every
// transaction it reads. A pull at the live end of a stream answers with
// whatever news it has (a moved position) at once, while a replay or a
// snapshot waits for its first rows.
func WaitWhile(f func() bool) CollectOption { return func(c *Collector) { c.waitWhile = f } }

// NoHoldBack makes the transaction that crosses a limit end the batch,
// added whole, instead of being held for the next batch. It is for a
// collector that does not outlive its batch: a pull request's
// subscription is parked between pages, and a transaction held back by a
// collector would be lost with it.
func NoHoldBack() CollectOption { return func(c *Collector) { c.noHoldBack = true } }

// SplitTxns makes a chunked transaction (DESIGN §3.1) batches of its own,
// cut to the limits, with a cursor only on the last (Collected.Part,
// Partial): for webhooks, whose batches must stay bounded. The cut
// depends only on the transaction's events and the limits, so the same
// transaction read again is cut into the same parts. Without it a
// batch never ends inside a transaction, however large (pull pages).
func SplitTxns() CollectOption { return func(c *Collector) { c.split = true } }

// EndInside lets a batch end inside a chunked transaction (DESIGN §3.1)
// when it is full or nothing more is ready, as a pull page does: its
// cursor then resumes inside the transaction (Subscription.ResumeCursor),
// and the feed cuts pieces to the room left (SplitCopy), so a page holds
// at most its limit of events however large the transaction. Without it
// (and SplitTxns) a batch ends only where a transaction does.
func EndInside() CollectOption { return func(c *Collector) { c.endInside = true } }

// NewCollector returns a collector reading f.
func NewCollector(f Feed, opts ...CollectOption) *Collector {
	c := &Collector{feed: f}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Collect reads the next batch into b. It blocks for the batch's first
// transaction with events, passing the position-only transactions before
// it to b, then adds the transactions that are ready, or come within
// lim.Linger, while they fit in lim.
//
// An error before the batch has events is returned at once, and so is the
// context's. An error after is returned by the next call, so that what
// was read is not lost.
func (c *Collector) Collect(ctx context.Context, b Batch, lim Limits) (Collected, error) {
	var res Collected
	if c.err != nil {
		return res, c.err
	}
	c.room(lim, &res)
	defer c.room(Limits{}, nil) // whole batches again for other readers of the feed
	d, err := c.first(ctx, b, &res)
	if err != nil {
		return res, err
	}
	if d != nil {
		if c.split && d.Chunked() {
			return c.collectPart(ctx, b, lim, d, res)
		}
		c.add(b, &res, d, eventBytes(d))
	}
	linger := time.Now().Add(lim.Linger)
	for c.inside && !c.endInside || !lim.full(&res) {
		c.room(lim, &res)
		d, ok, err := c.feed.TryNext(ctx)
		if err == nil && !ok && c.inside && !c.endInside {
			// The rest of a chunked transaction is on its way: a batch
			// does not end inside one.
			d, err = c.feed.Next(ctx)
			ok = err == nil
		}
		if err == nil && !ok {
			if time.Until(linger) <= 0 {
				res.Drained = true
				break
			}
			var timedOut bool
			if d, timedOut, err = c.next(ctx, linger); timedOut {
				res.Drained = true
				break
			}
		}
		if err != nil {
			switch {
			case res.Events == 0:
				return res, err
			case ctx.Err() != nil:
				return res, ctx.Err()
			}
			c.err = err
			break
		}
		if d.Heartbeat {
			continue
		}
		if c.split && d.Chunked() {
			c.held = d // a chunked transaction is cut into batches of its own
			break
		}
		n := eventBytes(d)
		if (!c.inside || c.endInside) && !c.noHoldBack && lim.over(&res, len(d.Events), n) {
			c.held = d
			break
		}
		c.add(b, &res, d, n)
	}
	return res, nil
}

// collectPart makes the next batch of a chunked transaction from d on:
// its events while they fit in lim (at least one), up to the
// transaction's last piece. What does not fit is held for the next part.
func (c *Collector) collectPart(ctx context.Context, b Batch, lim Limits, d *Delivery, res Collected) (Collected, error) {
	c.part++
	res.Part = c.part
	for {
		n, bytes := fit(lim, &res, d)
		if d.Partial {
			c.before = d.VGtid
		} else if c.before == nil {
			// The last piece, with no earlier one to tell the position
			// before the transaction: not cut (never happens: a reader
			// gets a chunked transaction from its first piece).
			n, bytes = len(d.Events), eventBytes(d)
		}
		if n < len(d.Events) {
			head, rest := *d.Txn, *d.Txn
			head.Events, head.Partial, head.VGtid = d.Events[:n:n], true, c.before
			rest.Events, rest.Continued = d.Events[n:], true
			if n > 0 {
				c.add(b, &res, &Delivery{Txn: &head}, bytes)
			}
			c.held = &Delivery{Txn: &rest, Cursor: d.Cursor}
			res.Partial = true
			return res, nil
		}
		c.add(b, &res, d, bytes)
		if !d.Partial {
			c.part, c.before = 0, nil
			return res, nil
		}
		if lim.full(&res) {
			res.Partial = true
			return res, nil
		}
		var err error
		if d, err = c.feed.Next(ctx); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			c.err, res.Partial = err, true
			return res, nil
		}
	}
}

// fit reports how many of d's events, from the first, fit in the batch
// (at least one in an empty batch), and their size.
func fit(lim Limits, res *Collected, d *Delivery) (n, bytes int) {
	for i := range d.Events {
		size := len(d.Events[i].JSON)
		events := res.Events + n
		if events > 0 && (lim.Events > 0 && events+1 > lim.Events || lim.Bytes > 0 && res.Bytes+bytes+size > lim.Bytes) {
			break
		}
		n++
		bytes += size
	}
	return n, bytes
}

// copySplitter is a feed that can cut a copy-phase batch to the room a
// batch has left (Subscription): a snapshot then pages by limit too.
type copySplitter interface{ SplitCopy(rows int) }

// room tells such a feed how many events the batch still takes.
func (c *Collector) room(lim Limits, res *Collected) {
	cs, ok := c.feed.(copySplitter)
	switch {
	case !ok:
	case lim.Events > 0:
		cs.SplitCopy(max(lim.Events-res.Events, 1))
	default:
		cs.SplitCopy(0)
	}
}

// Next returns the next transaction with events, passing over
// position-only transactions and heartbeats: a batch of one, for
// transports that send each transaction as it comes.
func (c *Collector) Next(ctx context.Context) (*Delivery, error) {
	if c.err != nil {
		return nil, c.err
	}
	var res Collected
	d, err := c.first(ctx, nil, &res)
	if err == nil && d == nil {
		err = ErrWaitOver
	}
	return d, err
}

// first waits for the first transaction with events and returns it;
// position-only transactions before it go to b, if not nil. It returns
// nil and no error when the wait ends without one.
func (c *Collector) first(ctx context.Context, b Batch, res *Collected) (*Delivery, error) {
	if d := c.held; d != nil {
		c.held = nil
		return d, nil
	}
	start := time.Now()
	idleFrom := start
	for {
		if c.waitWhile != nil && !c.waitWhile() {
			return nil, nil
		}
		deadline, ends := c.deadline(start, idleFrom)
		d, timedOut, err := c.next(ctx, deadline)
		switch {
		case timedOut && ends:
			res.TimedOut = true
			return nil, nil
		case timedOut:
			if err := c.onIdle(ctx); err != nil {
				return nil, err
			}
			idleFrom = time.Now()
			continue
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, err
		}
		if len(d.Events) > 0 {
			return d, nil
		}
		if b != nil && !d.Heartbeat {
			c.add(b, res, d, 0)
		}
	}
}

// deadline is when the current wait for a first transaction with events
// ends (zero: never); ends reports that it is FirstWait's, not an idle
// tick.
func (c *Collector) deadline(start, idleFrom time.Time) (t time.Time, ends bool) {
	if c.boundWait {
		t, ends = start.Add(c.firstWait), true
	}
	if c.onIdle != nil {
		if it := idleFrom.Add(c.idleEvery); t.IsZero() || it.Before(t) {
			t, ends = it, false
		}
	}
	return t, ends
}

// next reads the next transaction, waiting until deadline (zero: until ctx
// ends). timedOut reports that the deadline passed first.
func (c *Collector) next(ctx context.Context, deadline time.Time) (d *Delivery, timedOut bool, err error) {
	if deadline.IsZero() {
		d, err = c.feed.Next(ctx)
		return d, false, err
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	d, err = c.feed.Next(wctx)
	timedOut = err != nil && ctx.Err() == nil && wctx.Err() != nil && errors.Is(err, context.DeadlineExceeded)
	cancel()
	return d, timedOut, err
}

func (c *Collector) add(b Batch, res *Collected, d *Delivery, bytes int) {
	c.inside = d.Partial
	b.Add(d)
	res.Events += len(d.Events)
	res.Bytes += bytes
	res.Cursor = d.Cursor
}

// eventBytes is the encoded size of a transaction's events, as Limits
// count it.
func eventBytes(d *Delivery) int {
	n := 0
	for i := range d.Events {
		n += len(d.Events[i].JSON)
	}
	return n
}
