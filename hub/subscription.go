package hub

import (
	"context"
	"fmt"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Delivery is one transaction and the cursor token right after it, or a
// piece of a chunked transaction (Partial: no cursor yet).
type Delivery struct {
	*source.Txn
	Cursor string
}

// Subscription is one reader's ordered view of a stream. Not safe for
// concurrent use.
type Subscription struct {
	hub    *Hub
	def    *streams.Definition
	r      txnSource
	pos    *binlogdatapb.VGtid
	token  string
	failed bool
	seen   bool // a delivery was made
	// subscriber is the named subscriber reading, if any (for bridges on
	// a rebuild); replans counts rebuilds after shards vanished.
	subscriber string
	replans    int
	// caughtUp: the last delivery was at the head of the binlog (a
	// heartbeat, or a commit seen within caughtUpLag of being made) and
	// no copy phase is running.
	caughtUp bool
	// snapshot: a copy phase is running (from the start position or after
	// a resync) until its snapshot_complete event is delivered. Heartbeats
	// can arrive before the first copied rows.
	snapshot bool
	// copyRows cuts copy batches into pieces of at most this many rows
	// (see split.go); rest is what is left of the batch being delivered.
	copyRows int
	rest     *source.Txn
	// inTxn counts the events of the chunked transaction being delivered
	// that the reader has (DESIGN §3.1; from its cursor when it was opened
	// inside one); pos and token stay before the transaction until its
	// end. resumeTok is the cursor of where the reader is inside it, once
	// made (ResumeCursor), until the next delivery.
	inTxn     int
	resumeTok string
}

// SplitCopy makes the next copy-phase rows arrive in a piece of at most n
// rows, with a cursor of its own (0: whole batches). The collector sets it
// to the room left in the page before every read.
func (s *Subscription) SplitCopy(n int) { s.copyRows = n }

// cut returns the part of txn to deliver now and keeps the rest.
func (s *Subscription) cut(txn *source.Txn) *source.Txn {
	if txn.Chunked() {
		return s.cutPiece(txn)
	}
	if first, rest, ok := splitCopy(txn, s.copyRows); ok {
		s.rest = rest
		return first
	}
	return txn
}

// nextPiece returns the next piece of a batch being delivered, if any.
func (s *Subscription) nextPiece() *source.Txn {
	if s.rest == nil {
		return nil
	}
	t := s.rest
	s.rest = nil
	return s.cut(t)
}

// caughtUpLag is how old a commit may be when read and still count as live.
// Commit timestamps have whole-second resolution, hence two seconds.
const caughtUpLag = 2

// CaughtUp reports whether the subscription has reached the live end of
// the stream (as far as the last delivery tells).
func (s *Subscription) CaughtUp() bool {
	return s.caughtUp && !s.snapshot && !position.Of(s.pos).Copying()
}

// Fresh reports whether nothing has been delivered yet.
func (s *Subscription) Fresh() bool { return !s.seen }

// Definition returns the stream the subscription reads.
func (s *Subscription) Definition() *streams.Definition { return s.def }

// Position returns the position after the last delivery.
func (s *Subscription) Position() *binlogdatapb.VGtid { return s.pos }

// Cursor returns the token for the position after the last delivery. Before
// the first delivery of a stream that starts at "now", that is not known
// yet; the first Delivery (vtgate sends the current position at once) fixes
// it.
func (s *Subscription) Cursor(ctx context.Context) (string, error) {
	if s.token != "" {
		return s.token, nil
	}
	if !position.Of(s.pos).Concrete() {
		return "", nil
	}
	t, err := s.hub.Token(ctx, s.def, s.pos)
	if err != nil {
		return "", err
	}
	s.token = t
	return t, nil
}

// Next blocks for the next delivery.
func (s *Subscription) Next(ctx context.Context) (*Delivery, error) {
	if t := s.nextPiece(); t != nil {
		return s.deliver(ctx, t)
	}
	for {
		txn, err := s.r.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && s.replan(ctx, err) {
				continue
			}
			if ctx.Err() == nil {
				s.failed = true
			}
			return nil, err
		}
		return s.deliver(ctx, s.cut(txn))
	}
}

// TryNext returns a delivery only if one is ready now.
func (s *Subscription) TryNext(ctx context.Context) (*Delivery, bool, error) {
	if t := s.nextPiece(); t != nil {
		d, err := s.deliver(ctx, t)
		return d, err == nil, err
	}
	txn, ok, err := s.r.TryNext()
	if err != nil {
		if s.replan(ctx, err) {
			return nil, false, nil
		}
		s.failed = true
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	d, err := s.deliver(ctx, s.cut(txn))
	return d, err == nil, err
}

// replan handles a stream that died because its shards were deleted under
// it (a subscription open, or parked, across Reshard complete): the
// position is rebuilt exactly as on a reconnect and reading goes on. It
// reports whether reading can continue; a rebuild that fails (on_gap=fail)
// replaces err's meaning for the caller via s.r, which now returns it.
func (s *Subscription) replan(ctx context.Context, err error) bool {
	if _, _, missing := source.MissingShard(err); !missing || !position.Of(s.pos).Concrete() || s.replans >= 3 {
		return false
	}
	s.replans++
	var st *SubscriberState
	if s.subscriber != "" {
		if cur, gerr := s.hub.cursors.Get(ctx, s.def.Name, s.subscriber); gerr == nil && cur.spooled() {
			st = cur
		}
	}
	src, perr := s.hub.plan(ctx, s.def, s.pos, st, s.inTxn)
	if perr != nil {
		s.r.Close()
		s.r = &errSource{err: perr}
		return true
	}
	s.hub.log.Info("stream lost its shards to a reshard; continuing from the rebuilt position", "stream", s.def.Name, "err", err)
	s.r.Close()
	s.r = src
	return true
}

func (s *Subscription) deliver(ctx context.Context, txn *source.Txn) (*Delivery, error) {
	s.seen = true
	for i := range txn.Events {
		switch txn.Events[i].Type {
		case event.TypeResync:
			s.snapshot = true
		case event.TypeSnapshotComplete:
			s.snapshot = false
		}
	}
	switch {
	case txn.Heartbeat:
		s.caughtUp = true
	case txn.CommitTS > 0:
		s.caughtUp = txn.Received.Unix()-txn.CommitTS <= caughtUpLag
	}
	if txn.Heartbeat && s.token != "" {
		return &Delivery{Txn: txn, Cursor: s.token}, nil
	}
	s.resumeTok = ""
	if txn.Partial {
		// A piece of a chunked transaction has no cursor: the position
		// stays before the transaction until its last piece (DESIGN §3.1).
		s.inTxn += len(txn.Events)
		return &Delivery{Txn: txn}, nil
	}
	if !txn.Heartbeat {
		s.inTxn = 0
	}
	tok := ""
	if ts, ok := s.r.(tokenSource); ok {
		if d := ts.sharedDelivery(); d != nil && d.Txn == txn {
			// In step with the tail: its delivery, made once for all.
			s.pos, s.token = txn.VGtid, d.Cursor
			return d, nil
		}
		tok = ts.cursorToken()
	}
	var err error
	if tok == "" {
		tok, err = s.hub.Token(ctx, s.def, txn.VGtid)
	}
	if err != nil {
		s.failed = true
		return nil, fmt.Errorf("hub: cursor for stream %s: %w", s.def.Name, err)
	}
	s.pos, s.token = txn.VGtid, tok
	return &Delivery{Txn: txn, Cursor: tok}, nil
}

// Park registers, when nothing is ready (TryNext would return nothing) and
// the subscription follows its stream's tail at its head, wake to run
// once it may have more: at the tail's next append, or when the tail
// stops. A reader then needs no goroutine while it waits (an idle
// WebSocket, DESIGN §6.1). wake runs on the tail's goroutine and must not
// block. Park reports false otherwise — something is ready, or the source
// (a catch-up VStream, a spool, a move between keyspaces) can only be
// waited on in Next. A wake-up may bring only a heartbeat. The reader
// withdraws a registration it no longer needs with Parked.Stop.
func (s *Subscription) Park(wake func()) (*Parked, bool) {
	if s.rest != nil {
		return nil, false
	}
	return parkOf(s.r, wake)
}

// Buffered reports how many transactions are ready without blocking.
func (s *Subscription) Buffered() int {
	if s.rest != nil {
		return 1 + s.r.Buffered()
	}
	return s.r.Buffered()
}

// Close ends the subscription.
func (s *Subscription) Close() { s.close() }

func (s *Subscription) close() { s.r.Close() }

// cutPiece cuts a piece of a chunked transaction to the room the reader has
// (SplitCopy), like a copy batch: a pull page then ends inside a huge
// transaction at its limit, and its cursor says where (ResumeCursor). The
// part delivered now is Partial, at the position before the transaction.
func (s *Subscription) cutPiece(txn *source.Txn) *source.Txn {
	n := s.copyRows
	if n <= 0 || len(txn.Events) <= n {
		return txn
	}
	first, rest := *txn, *txn
	first.Events, first.Partial, first.VGtid = txn.Events[:n:n], true, s.pos
	rest.Events, rest.Continued = txn.Events[n:], true
	s.rest = &rest
	return &first
}

// InTxn reports whether the reader is inside a chunked transaction: the
// last delivery was a piece of one, not its end.
func (s *Subscription) InTxn() bool { return s.inTxn > 0 }

// ResumeCursor returns the cursor of exactly where the reader is: inside a
// chunked transaction the position before it with the number of its
// events delivered (a version 2 token, DESIGN §3.1), otherwise Cursor.
// Only pull pages hand it out: WebSocket, SSE and webhooks resume a
// transaction from its start.
func (s *Subscription) ResumeCursor(ctx context.Context) (string, error) {
	if s.inTxn == 0 {
		return s.Cursor(ctx)
	}
	if s.resumeTok == "" {
		tok, err := s.hub.codec.EncodeIn(ctx, scope(s.def), s.pos, s.inTxn)
		if err != nil {
			return "", err
		}
		s.resumeTok = tok
	}
	return s.resumeTok, nil
}
