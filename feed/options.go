package feed

import "time"

// CollectOption configures a Collector.
type CollectOption func(*Collector)

// IdleEvery makes Collect and Next return ErrIdle whenever every passes,
// while they wait for a transaction with events, without one: counted
// from the start of the wait (heartbeats and position-only transactions
// do not restart it). The reader does what an idle reader does and calls
// again: push transports send a heartbeat, webhooks store the position of
// rows their filter dropped. Position-only transactions read before
// ErrIdle were passed to the batch. Use it without FirstWait, whose wait
// would restart with each call.
func IdleEvery(every time.Duration) CollectOption {
	return func(c *Collector) { c.idleEvery = every }
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

// BeforeWait makes the collector call f whenever it is about to block for
// the next transaction (none is ready). A push transport that held back a
// flush because more was ready flushes there: what was "ready" may have
// been transactions the collector passes over (position-only, heartbeats),
// and without it the held bytes would wait for the next heartbeat.
func BeforeWait(f func() error) CollectOption { return func(c *Collector) { c.beforeWait = f } }
