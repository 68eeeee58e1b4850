package hub

import (
	"context"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// Resuming inside a chunked transaction (DESIGN §3.1). A pull page may end
// inside a transaction delivered in pieces: its next_cursor is the position
// before the transaction and the number of its events the reader has
// (cursor version 2). A subscription opened there reads the transaction
// again from that position — vtgate sends it from its first event, the
// binlog holds it unchanged — and drops that many events.

// skipSource drops the first n events of the first transaction with events
// its source delivers: the one a position inside a transaction points
// into. Its first piece delivered is marked Continued.
type skipSource struct {
	txnSource
	n int
}

func (s *skipSource) Next(ctx context.Context) (*source.Txn, error) {
	for {
		t, err := s.txnSource.Next(ctx)
		if err != nil {
			return nil, err
		}
		if t = s.trim(t); t != nil {
			return t, nil
		}
	}
}

func (s *skipSource) TryNext() (*source.Txn, bool, error) {
	for {
		t, ok, err := s.txnSource.TryNext()
		if !ok || err != nil {
			return t, ok, err
		}
		if t = s.trim(t); t != nil {
			return t, true, nil
		}
	}
}

// trim returns what is left of t to deliver, nil for a piece of the
// transaction wholly delivered already.
func (s *skipSource) trim(t *source.Txn) *source.Txn {
	if s.n == 0 || len(t.Events) == 0 {
		return t
	}
	out := *t
	k := min(s.n, len(t.Events))
	out.Events, out.Continued = t.Events[k:], true
	s.n -= k
	if out.Partial && len(out.Events) == 0 {
		return nil
	}
	return &out
}

// cursorToken passes the tail's shared token through (a trimmed delivery
// ends where the source's does).
func (s *skipSource) cursorToken() string {
	if ts, ok := s.txnSource.(tokenSource); ok {
		return ts.cursorToken()
	}
	return ""
}

// sharedDelivery passes the tail's delivery through: it is the reader's
// only when no event of it was skipped (the transaction is the same).
func (s *skipSource) sharedDelivery() *Delivery {
	if ts, ok := s.txnSource.(tokenSource); ok {
		return ts.sharedDelivery()
	}
	return nil
}
