package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// capture streams from `from` with stop_on_reshard into the spool log and
// returns the position after it: the last position seen with j's
// participants replaced by its targets. (The stream's own last VGTID points
// past the journal on the old shards; resuming from it never reaches the
// new shards.) A MoveTables source gets no journal event (DESIGN §4.1):
// its capture ends when every source shard reached the journal's local
// position, and drops what follows on a shard already there (the reverse
// workflow's copies).
func (h *Hub) capture(ctx context.Context, def *streams.Definition, from *binlogdatapb.VGtid, j *reshard.Journal, log string, status *BridgeStatus, fence *store.Lease) (*binlogdatapb.VGtid, error) {
	if err := h.st.DeleteLog(ctx, log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.bridgeTimeout)
	defer cancel()
	r := h.openBridgeStream(ctx, def, j, from)
	defer r.close()
	w := &spoolWriter{st: h.st, log: log, fence: fence, status: status, maxEvents: h.spoolMaxEvents, maxBytes: h.spoolMaxBytes}
	last, local := from, j.LocalPosition()
	for !j.Moves() || !position.Of(last).Covers(local) {
		txn, err := r.next(ctx, last)
		if errors.Is(err, source.ErrStopped) {
			break
		}
		if err != nil {
			return nil, err
		}
		if txn.Journal != nil || j.Moves() && upstream.PastCutover(last, txn, j.Keyspace, local) {
			continue
		}
		r.spooled(txn)
		last = txn.VGtid
		if err := w.add(ctx, txn); err != nil {
			return nil, err
		}
	}
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	after := j.Apply(position.Of(last))
	if j.Moves() {
		// The tables left the source keyspace altogether.
		after = after.Replace(j.Keyspace, after.InKeyspace(j.Keyspace).ShardNames())
	}
	return after.VGtid(), nil
}

// bridgeStream is a bridge's VStream on the old shards, reopened when it
// stalls.
//
// Race against `Reshard complete`: a VStream opened while the switch is
// still settling can spend vtgate's 90 s looking for the old shard's
// primary, sending only its heartbeats meanwhile. Every old shard's
// journal is already in its binlog, so a bridge stream that delivers
// nothing but heartbeats for stall is not progressing: it is reopened
// from the last transaction captured (whose positions keep each old shard
// before its journal, source/assemble.go). Each reopen doubles the window,
// so that an old shard that is merely slow to reach its journal (a long
// binlog of other tables to skip) is reopened a few times at most, never
// in a loop.
type bridgeStream struct {
	src     upstream.Opener
	spec    source.Spec
	opts    []source.ReadOption
	r       *source.Reader
	log     *slog.Logger
	stream  string // for the log
	journal string

	stall, max time.Duration
	progress   time.Time
	// open counts the events of a chunked transaction spooled so far
	// (DESIGN §3.1): a reopened stream starts before the transaction and
	// skips them, or they would be spooled twice.
	open int
}

func (h *Hub) openBridgeStream(ctx context.Context, def *streams.Definition, j *reshard.Journal, from *binlogdatapb.VGtid) *bridgeStream {
	b := &bridgeStream{
		src:  h.src,
		spec: source.Spec{Name: def.Name + "/bridge", Keyspace: j.Keyspace, Rules: def.VitessRules()},
		log:  h.log, stream: def.Name, journal: j.Key, stall: h.bridgeStall, max: h.bridgeTimeout, progress: time.Now(),
	}
	if !j.Moves() {
		b.opts = append(b.opts, source.StopOnReshard())
	}
	b.r = b.src.Open(ctx, b.spec, from, b.opts...)
	return b
}

// next is the next transaction with events or a position (heartbeats are
// skipped), reopening the stream at last when it stalls.
func (b *bridgeStream) next(ctx context.Context, last *binlogdatapb.VGtid) (*source.Txn, error) {
	for {
		nctx, ncancel := context.WithDeadline(ctx, b.progress.Add(b.stall))
		txn, err := b.r.Next(nctx)
		// Read before ncancel, which would make every error look like one.
		stalled := err != nil && ctx.Err() == nil && nctx.Err() != nil
		ncancel()
		switch {
		case errors.Is(err, source.ErrStopped):
			return nil, err
		case stalled:
			b.reopen(ctx, last)
		case err != nil:
			return nil, fmt.Errorf("bridge stream: %w", err)
		case !txn.Heartbeat:
			b.progress = time.Now()
			return txn, nil
		}
	}
}

func (b *bridgeStream) reopen(ctx context.Context, last *binlogdatapb.VGtid) {
	b.log.Info("bridge stream made no progress; reopening", "stream", b.stream, "journal", b.journal,
		"from", last, "for", b.stall)
	b.r.Close()
	opts := b.opts
	if b.open > 0 {
		opts = append(slices.Clone(b.opts), source.ResumeInTxn(b.open))
	}
	b.r = b.src.Open(ctx, b.spec, last, opts...)
	b.stall, b.progress = min(2*b.stall, b.max), time.Now()
}

// spooled counts what a reopen must skip of a chunked transaction.
func (b *bridgeStream) spooled(txn *source.Txn) {
	if txn.Partial {
		b.open += len(txn.Events)
	} else {
		b.open = 0
	}
}

func (b *bridgeStream) close() { b.r.Close() }

// spoolWriter appends a bridge's transactions to its spool log in batches,
// fenced by the bridge's lease when it has one, within the spool's limits.
type spoolWriter struct {
	st                  store.Store
	log                 string
	fence               *store.Lease
	status              *BridgeStatus
	maxEvents, maxBytes int
	batch               [][]byte
}

// add spools a transaction with events; position-only ones only move the
// capture's position.
func (w *spoolWriter) add(ctx context.Context, txn *source.Txn) error {
	if len(txn.Events) == 0 {
		return nil
	}
	b, err := encodeSpoolEntry(txn)
	if err != nil {
		return err
	}
	w.status.Events += len(txn.Events)
	w.status.Bytes += len(b)
	if w.status.Events > w.maxEvents || w.status.Bytes > w.maxBytes {
		return fmt.Errorf("%w (%d events, %d bytes)", ErrSpoolFull, w.status.Events, w.status.Bytes)
	}
	w.batch = append(w.batch, b)
	if len(w.batch) >= 128 {
		return w.flush(ctx)
	}
	return nil
}

func (w *spoolWriter) flush(ctx context.Context) error {
	if len(w.batch) == 0 {
		return nil
	}
	var err error
	if w.fence != nil {
		_, err = w.st.AppendFenced(ctx, w.log, w.fence.Name, w.fence.Token, w.batch...)
	} else {
		_, err = w.st.Append(ctx, w.log, w.batch...)
	}
	w.batch = w.batch[:0]
	return err
}
