package bridge

import (
	"context"
	"errors"
	"fmt"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
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
func (b *Bridger) capture(ctx context.Context, def *streams.Definition, from *binlogdatapb.VGtid, j *reshard.Journal, log string, status *Status, fence *store.Lease) (*binlogdatapb.VGtid, error) {
	if err := b.st.DeleteLog(ctx, log); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	r := b.openBridgeStream(ctx, def, j, from)
	defer r.close()
	w := &spoolWriter{st: b.st, log: log, fence: fence, status: status, maxEvents: b.opts.maxEvents, maxBytes: b.opts.maxBytes}
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

// spoolWriter appends a bridge's transactions to its spool log in batches,
// fenced by the bridge's lease when it has one, within the spool's limits.
type spoolWriter struct {
	st                  store.Store
	log                 string
	fence               *store.Lease
	status              *Status
	maxEvents, maxBytes int
	batch               [][]byte
}

// add spools a transaction with events; position-only ones only move the
// capture's position.
func (w *spoolWriter) add(ctx context.Context, txn *source.Txn) error {
	if len(txn.Events) == 0 {
		return nil
	}
	b, err := hub.EncodeSpoolEntry(txn)
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
