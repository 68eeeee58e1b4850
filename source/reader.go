package source

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/cenkalti/backoff/v5"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtgatepb "vitess.io/vitess/go/vt/proto/vtgate"
	"vitess.io/vitess/go/vt/vtgate/vtgateconn"

	"github.com/vstream-gateway/vstream-gateway/internal/budget"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
)

// ErrStopped is returned by Next after a reader opened with StopOnReshard
// reached a reshard journal: the stream ended on purpose and the journal's
// shard positions are where to continue.
var ErrStopped = errors.New("source: stream stopped at reshard journal")

// ReadOption configures one Reader.
type ReadOption func(*readOptions)

type readOptions struct {
	stopOnReshard bool
	skip          int
}

// ResumeInTxn opens the stream at a position right before a chunked
// transaction of which the caller has n events already (it read them
// elsewhere, DESIGN §3.1): those are dropped, and the first piece
// delivered is marked Continued.
func ResumeInTxn(n int) ReadOption { return func(o *readOptions) { o.skip = n } }

// StopOnReshard ends the stream after the first reshard JOURNAL (used to
// capture an old shard's remaining events before it is deleted).
func StopOnReshard() ReadOption { return func(o *readOptions) { o.stopOnReshard = true } }

type result struct {
	txn    *Txn
	err    error
	weight int // bytes taken from the read-ahead budget
}

// Reader delivers the transactions of one VStream in order.
type Reader struct {
	c      *Client
	spec   Spec
	opts   readOptions
	cancel context.CancelFunc
	out    chan result
	budget *budget.Bytes
	done   chan struct{}
	err    error   // terminal error, set once Next has returned it
	down   *outage // set while the VStream waits for vtgate (run's goroutine only)
	// open counts the events of a chunked transaction delivered so far
	// (run's goroutine only): an attempt after a failure resumes before
	// the transaction and skips them.
	open int
	// waitFrom is when the current wait for vtgate began: the last
	// answer received, or the start of the attempt, or the reader's return
	// from its consumer (run's goroutine only). An outage began then.
	waitFrom time.Time
	// track is what the primary watch sees of the reader (reparent.go).
	track shardTrack
}

// Open starts streaming spec from position from. Failures are reported by
// Next, which lets callers treat a bad position the same whether vtgate
// refuses it at once or at the first Recv.
func (c *Client) Open(ctx context.Context, spec Spec, from *binlogdatapb.VGtid, opts ...ReadOption) *Reader {
	ctx, cancel := context.WithCancel(ctx)
	r := &Reader{
		c:      c,
		spec:   spec,
		cancel: cancel,
		out:    make(chan result, c.opts.queueTxns),
		budget: budget.New(c.opts.readAhead),
		done:   make(chan struct{}),
	}
	for _, o := range opts {
		o(&r.opts)
	}
	r.open = r.opts.skip
	if !c.life.started() {
		cancel()
		r.err = ErrClientClosed
		close(r.out)
		close(r.done)
		return r
	}
	// Closing the client ends the reader as closing the reader does.
	stop := context.AfterFunc(c.life.closing, cancel)
	c.readers.add(r)
	go func() {
		defer c.life.running.Done()
		defer stop()
		r.run(ctx, from)
	}()
	return r
}

// Next returns the next transaction. It blocks until one is available, ctx
// ends, or the stream fails for good.
func (r *Reader) Next(ctx context.Context) (*Txn, error) {
	if r.err != nil {
		return nil, r.err
	}
	select {
	case res, ok := <-r.out:
		if !ok {
			r.err = context.Canceled
			return nil, r.err
		}
		r.budget.Release(res.weight)
		if res.err != nil {
			r.err = res.err
		}
		return res.txn, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryNext returns a transaction only if one is buffered already.
func (r *Reader) TryNext() (*Txn, bool, error) {
	if r.err != nil {
		return nil, false, r.err
	}
	select {
	case res, ok := <-r.out:
		if !ok {
			r.err = context.Canceled
			return nil, false, r.err
		}
		r.budget.Release(res.weight)
		if res.err != nil {
			r.err = res.err
			return nil, false, res.err
		}
		return res.txn, true, nil
	default:
		return nil, false, nil
	}
}

// Buffered reports how many results are waiting.
func (r *Reader) Buffered() int { return len(r.out) }

// Close stops the stream and waits for its goroutine.
func (r *Reader) Close() {
	r.cancel()
	<-r.done
}

func (r *Reader) flags() *vtgatepb.VStreamFlags {
	return &vtgatepb.VStreamFlags{
		HeartbeatInterval:           uint32(r.c.opts.heartbeat / time.Second),
		IncludeReshardJournalEvents: true,
		StopOnReshard:               r.opts.stopOnReshard,
		// One keyspace per stream: table names need no keyspace prefix,
		// and vtgate then skips a clone of every ROW and FIELD event.
		ExcludeKeyspaceFromTableName: true,
		// vtgate would otherwise assemble every transaction whole before
		// sending it; past this size it streams one in contiguous chunks
		// (no other shard's events in between), as the assembler hands
		// it on (DESIGN §3.1).
		TransactionChunkSize: int64(r.c.opts.chunkBytes),
	}
}

// stallTimeout is how long the reader waits for vtgate before it takes the
// stream for stalled; 0 (off) when vtgate sends no heartbeats, since an
// idle stream is then silent by design.
func (r *Reader) stallTimeout() time.Duration {
	if r.flags().HeartbeatInterval == 0 {
		return 0
	}
	return r.c.opts.stallTimeout
}

func (r *Reader) run(ctx context.Context, from *binlogdatapb.VGtid) {
	defer close(r.done)
	defer close(r.out)
	defer r.c.readers.remove(r)
	bo := &backoff.ExponentialBackOff{
		InitialInterval:     100 * time.Millisecond,
		RandomizationFactor: 0.3,
		Multiplier:          2,
		MaxInterval:         r.c.opts.maxRetryWait,
	}
	bo.Reset()
	defer r.endOutage("closed")
	pos := from
	for {
		next, progressed, journal, err := r.attempt(ctx, pos)
		pos = next
		if ctx.Err() != nil {
			return
		}
		// Once every participant's JOURNAL is delivered the old shards
		// have nothing more; resuming from the journal transaction's
		// position (past the cutover) would never see the journal again.
		if r.opts.stopOnReshard && (journal == journalDone || journal == journalSeen && (errors.Is(err, io.EOF) || err == nil)) {
			r.send(ctx, result{err: ErrStopped})
			return
		}
		if table, ok := UnknownTable(err); ok {
			// Final only once vtgate confirms the table is gone (see
			// UnknownTable); otherwise it is retried like any outage.
			if tm := r.tableMissing(ctx, table, err); tm != nil {
				r.endOutage("failed")
				r.send(ctx, result{err: tm})
				return
			}
		} else if !Retryable(err) {
			r.endOutage("failed")
			r.send(ctx, result{err: err})
			return
		}
		if progressed {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		if errors.Is(err, ErrReparented) {
			// Nothing failed: vtgate is asked again at once, and picks
			// the shard's new primary.
			wait = 0
		}
		r.lost(err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// attempt streams from pos until an error; it returns the position of the
// last transaction delivered, whether any was, and whether a journal was seen.
//
// The stream has a context of its own, cancelled with a *StallError when
// vtgate sends nothing for the stall timeout, or with a *ReparentError when
// the primary of one of its shards changed (reparent.go); everything else
// (schema lookups, the hand-over to the consumer) runs under ctx, so
// neither can end more than a wait for vtgate, never a delivery half done.
func (r *Reader) attempt(ctx context.Context, pos *binlogdatapb.VGtid) (*binlogdatapb.VGtid, bool, journalState, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := watchStall(r.stallTimeout(), cancel)
	defer watch.stop()
	r.track.begin(r.spec.Keyspace, pos, cancel)
	defer r.track.end()
	r.waitFrom = time.Now()
	watch.waiting(r.waitFrom)
	vs, err := r.vstream(sctx, pos)
	if err != nil {
		watch.received()
		return pos, false, noJournal, stallCause(ctx, sctx, err)
	}
	asm := newAssembler(r.spec, r.c.schema, pos, r.c.opts.onJournal, r.c.opts.chunkBytes, r.open)
	asm.incarnations = r.c.opts.incarnations
	progressed, journal, err := r.receive(ctx, sctx, vs, asm, watch)
	// asm.pos is the last whole transaction.
	return asm.pos, progressed, journal, err
}

// vstream asks vtgate for the stream from pos, under the stream's context
// sctx.
func (r *Reader) vstream(sctx context.Context, pos *binlogdatapb.VGtid) (vtgateconn.VStreamReader, error) {
	flags := r.flags()
	flags.TablesToCopy = tablesToCopy(r.spec, pos)
	// vtgate knows no incarnations (position/incarnation.go).
	return r.c.conn.VStream(sctx, r.c.opts.tabletType, position.Of(pos).ForVTGate(), r.spec.Filter(), flags)
}

// stallCause is err, or, when the stream's context sctx (not ctx) was
// cancelled for a stall or a reparent, that cause: err is then only the
// cancellation's echo.
func stallCause(ctx, sctx context.Context, err error) error {
	if cause := context.Cause(sctx); ctx.Err() == nil && (errors.Is(cause, ErrStalled) || errors.Is(cause, ErrReparented)) {
		return cause
	}
	return err
}

// receive reads vs into asm and delivers its transactions until an error.
// It reports whether any transaction was delivered and how far through a
// reshard journal the stream got.
func (r *Reader) receive(ctx, sctx context.Context, vs vtgateconn.VStreamReader, asm *assembler, watch *stallWatch) (bool, journalState, error) {
	progressed, journal := false, noJournal
	for first := true; ; first = false {
		if !first {
			r.waitFrom = time.Now()
			watch.waiting(r.waitFrom)
		}
		evs, err := vs.Recv()
		if !watch.received() {
			// Whatever Recv returned came too late: the stream is
			// cancelled.
			return progressed, journal, stallCause(ctx, sctx, err)
		}
		if err != nil {
			return progressed, journal, stallCause(ctx, sctx, err)
		}
		r.track.saw(evs)
		if r.down != nil {
			// vtgate streams again (its first answer on a resumed stream
			// comes within a heartbeat interval).
			r.endOutage("resumed")
		}
		for _, ev := range evs {
			txn, err := asm.add(ctx, ev)
			if err != nil {
				return progressed, journal, err
			}
			if txn == nil {
				continue
			}
			before, err := r.beforeResumed(txn)
			if err != nil {
				return progressed, journal, err
			}
			if before {
				continue
			}
			r.countOpen(txn)
			journal = journal.after(asm, txn)
			if !r.deliver(ctx, txn) {
				return progressed, journal, ctx.Err()
			}
			progressed = true
		}
	}
}

// beforeResumed reports whether txn comes before the chunked transaction
// the attempt resumes (r.open of its events were delivered already): a
// position or heartbeat, nothing new. Events there are a ProtocolError.
func (r *Reader) beforeResumed(txn *Txn) (bool, error) {
	if r.open <= 0 || txn.Continued {
		return false, nil
	}
	if len(txn.Events) > 0 {
		return false, &ProtocolError{Msg: "a resumed chunked transaction did not come first"}
	}
	return true, nil
}

// countOpen keeps r.open, the events of a chunked transaction delivered so
// far, as txn is delivered.
func (r *Reader) countOpen(txn *Txn) {
	if txn.Partial {
		r.open += len(txn.Events)
	} else {
		r.open = 0
	}
}

// deliver hands txn to the consumer; false when ctx ended first.
func (r *Reader) deliver(ctx context.Context, txn *Txn) bool {
	// Past the read-ahead budget, stop reading: gRPC flow control
	// then pauses vtgate until the consumer catches up.
	w := txn.Weight()
	if r.budget.Acquire(ctx, w) != nil || !r.send(ctx, result{txn: txn, weight: w}) {
		return false
	}
	metrics.EventsIn(r.spec.Name, len(txn.Events))
	return true
}

// journalState is how far an attempt got through a reshard journal.
type journalState int

const (
	noJournal   journalState = iota
	journalSeen              // some participant's JOURNAL delivered
	journalDone              // every participant's JOURNAL delivered
)

// after is s once txn is delivered.
func (s journalState) after(asm *assembler, txn *Txn) journalState {
	if txn.Journal == nil || s == journalDone {
		return s
	}
	if asm.journalDone(txn.Journal) {
		return journalDone
	}
	return journalSeen
}

func (r *Reader) send(ctx context.Context, res result) bool {
	select {
	case r.out <- res:
		return true
	case <-ctx.Done():
		return false
	}
}
