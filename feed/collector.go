// Package feed cuts a subscription into what transports send: batches of
// whole transactions (a pull page, a webhook call) or one transaction at a
// time as it comes (SSE, WebSocket), within limits given per call. The hub
// hands each reader a *hub.Subscription; a transport reads it through a
// Collector and encodes what the Collector hands it (DESIGN §6).
package feed

import (
	"context"
	"errors"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
)

// Reader is an ordered view of a stream, one whole transaction at a time:
// what *hub.Subscription provides. Transports may wrap it (a pull request
// applies its token's table scope as it reads).
type Reader interface {
	// Next blocks for the next transaction.
	Next(ctx context.Context) (*hub.Delivery, error)
	// TryNext returns a transaction only if one is ready now.
	TryNext(ctx context.Context) (*hub.Delivery, bool, error)
}

// Batch receives what Collect reads, whole transactions in order. The
// batch encodes them; the collector only decides where a batch ends.
type Batch interface {
	// Add takes one transaction. Position-only ones (no events: the
	// filter dropped their rows) are passed too, because they move the
	// position a batch ends at; heartbeats are not.
	Add(d *hub.Delivery)
}

// ErrWaitOver is what Next returns when its wait for a transaction with
// events ended (FirstWait, WaitWhile) before one came.
var ErrWaitOver = errors.New("feed: the wait for a transaction with events is over")

// ErrIdle is what Collect and Next return when the reader is idle
// (IdleEvery); calling again goes on waiting.
var ErrIdle = errors.New("feed: idle")

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
	feed Reader

	idleEvery  time.Duration // IdleEvery: 0 never idle
	firstWait  time.Duration
	boundWait  bool // firstWait applies
	waitWhile  func() bool
	beforeWait func() error
	noHoldBack bool

	held *hub.Delivery
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

// NewCollector returns a collector reading f.
func NewCollector(f Reader, opts ...CollectOption) *Collector {
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
func (c *Collector) collectPart(ctx context.Context, b Batch, lim Limits, d *hub.Delivery, res Collected) (Collected, error) {
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
				c.add(b, &res, &hub.Delivery{Txn: &head}, bytes)
			}
			c.held = &hub.Delivery{Txn: &rest, Cursor: d.Cursor}
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
func fit(lim Limits, res *Collected, d *hub.Delivery) (n, bytes int) {
	for i := range d.Events {
		size := d.Events[i].Size()
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
func (c *Collector) Next(ctx context.Context) (*hub.Delivery, error) {
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
func (c *Collector) first(ctx context.Context, b Batch, res *Collected) (*hub.Delivery, error) {
	if d := c.held; d != nil {
		c.held = nil
		return d, nil
	}
	start := time.Now()
	for {
		if c.waitWhile != nil && !c.waitWhile() {
			return nil, nil
		}
		deadline, ends := c.deadline(start)
		d, timedOut, err := c.next(ctx, deadline)
		switch {
		case timedOut && ends:
			res.TimedOut = true
			return nil, nil
		case timedOut:
			return nil, ErrIdle
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
func (c *Collector) deadline(start time.Time) (t time.Time, ends bool) {
	if c.boundWait {
		t, ends = start.Add(c.firstWait), true
	}
	if c.idleEvery > 0 {
		if it := start.Add(c.idleEvery); t.IsZero() || it.Before(t) {
			t, ends = it, false
		}
	}
	return t, ends
}

// next reads the next transaction, waiting until deadline (zero: until ctx
// ends). timedOut reports that the deadline passed first.
func (c *Collector) next(ctx context.Context, deadline time.Time) (d *hub.Delivery, timedOut bool, err error) {
	if c.beforeWait != nil {
		d, ok, err := c.feed.TryNext(ctx)
		if ok || err != nil {
			return d, false, err
		}
		if err := c.beforeWait(); err != nil {
			return nil, false, err
		}
	}
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

func (c *Collector) add(b Batch, res *Collected, d *hub.Delivery, bytes int) {
	c.inside = d.Partial
	b.Add(d)
	res.Events += len(d.Events)
	res.Bytes += bytes
	res.Cursor = d.Cursor
}

// eventBytes is the encoded size of a transaction's events, as Limits
// count it.
func eventBytes(d *hub.Delivery) int {
	n := 0
	for i := range d.Events {
		n += d.Events[i].Size()
	}
	return n
}
