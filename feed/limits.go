package feed

import "time"

// Limits bound one batch; zero means unbounded. They are given per call,
// so that a consumer whose settings change (a webhook's batch_max_events)
// applies them from its next batch.
type Limits struct {
	// Events bounds the events of a batch, Bytes their size (the encoded
	// events, Event.Size: JSON and Tail, without cursors or separators).
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
