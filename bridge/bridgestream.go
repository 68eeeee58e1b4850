package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

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

func (b *Bridger) openBridgeStream(ctx context.Context, def *streams.Definition, j *reshard.Journal, from *binlogdatapb.VGtid) *bridgeStream {
	s := &bridgeStream{
		src:  b.src,
		spec: source.Spec{Name: def.Name + "/bridge", Keyspace: j.Keyspace, Rules: def.VitessRules()},
		log:  b.log, stream: def.Name, journal: j.Key, stall: b.opts.stall, max: b.opts.timeout, progress: time.Now(),
	}
	if !j.Moves() {
		s.opts = append(s.opts, source.StopOnReshard())
	}
	s.r = s.src.Open(ctx, s.spec, from, s.opts...)
	return s
}

// next is the next transaction with events or a position (heartbeats are
// skipped), reopening the stream at last when it stalls.
func (s *bridgeStream) next(ctx context.Context, last *binlogdatapb.VGtid) (*source.Txn, error) {
	for {
		nctx, ncancel := context.WithDeadline(ctx, s.progress.Add(s.stall))
		txn, err := s.r.Next(nctx)
		// Read before ncancel, which would make every error look like one.
		stalled := err != nil && ctx.Err() == nil && nctx.Err() != nil
		ncancel()
		switch {
		case errors.Is(err, source.ErrStopped):
			return nil, err
		case stalled:
			s.reopen(ctx, last)
		case err != nil:
			return nil, fmt.Errorf("bridge stream: %w", err)
		case !txn.Heartbeat:
			s.progress = time.Now()
			return txn, nil
		}
	}
}

func (s *bridgeStream) reopen(ctx context.Context, last *binlogdatapb.VGtid) {
	s.log.Info("bridge stream made no progress; reopening", "stream", s.stream, "journal", s.journal,
		"from", last, "for", s.stall)
	s.r.Close()
	opts := s.opts
	if s.open > 0 {
		opts = append(slices.Clone(s.opts), source.ResumeInTxn(s.open))
	}
	s.r = s.src.Open(ctx, s.spec, last, opts...)
	s.stall, s.progress = min(2*s.stall, s.max), time.Now()
}

// spooled counts what a reopen must skip of a chunked transaction.
func (s *bridgeStream) spooled(txn *source.Txn) {
	if txn.Partial {
		s.open += len(txn.Events)
	} else {
		s.open = 0
	}
}

func (s *bridgeStream) close() { s.r.Close() }
