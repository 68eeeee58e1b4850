package hub

import (
	"context"
	"io"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// txnSource is anything a subscription reads transactions from: a live
// VStream reader, a bridge spool, a few synthesized control events. A
// subscription reads a chain of them: e.g. spool, then reshard notice, then
// the VStream on the new shards.
type txnSource interface {
	Next(ctx context.Context) (*source.Txn, error)
	TryNext() (*source.Txn, bool, error)
	Buffered() int
	Close()
}

// tokenSource is a source that can name the cursor token of its last
// delivery itself (the tail's, shared by every reader in step with it), so
// that it is not encoded once per reader.
type tokenSource interface {
	cursorToken() string
	// sharedDelivery returns a delivery made once for every reader of
	// the last transaction, or nil; it is the reader's only when its
	// transaction is the one returned.
	sharedDelivery() *Delivery
}

// parker is a source that can wake a reader with nothing to read when it
// has more, instead of the reader blocking in Next (Subscription.Park).
type parker interface {
	park(wake func()) (*Parked, bool)
}

func parkOf(src txnSource, wake func()) (*Parked, bool) {
	if p, ok := src.(parker); ok {
		return p.park(wake)
	}
	return nil, false
}

// sliceSource yields fixed transactions, then io.EOF.
type sliceSource struct{ txns []*source.Txn }

func (s *sliceSource) Next(ctx context.Context) (*source.Txn, error) {
	t, ok, err := s.TryNext()
	if !ok && err == nil {
		return nil, io.EOF
	}
	return t, err
}

func (s *sliceSource) TryNext() (*source.Txn, bool, error) {
	if len(s.txns) == 0 {
		return nil, false, io.EOF
	}
	t := s.txns[0]
	s.txns = s.txns[1:]
	return t, true, nil
}

func (s *sliceSource) Buffered() int { return len(s.txns) }
func (s *sliceSource) Close()        {}

// lazySource opens its source on first use, so a chain does not start the
// live VStream while a long spool is still being replayed.
type lazySource struct {
	open func() txnSource
	src  txnSource
}

func (l *lazySource) get() txnSource {
	if l.src == nil {
		l.src = l.open()
	}
	return l.src
}

func (l *lazySource) Next(ctx context.Context) (*source.Txn, error) { return l.get().Next(ctx) }
func (l *lazySource) TryNext() (*source.Txn, bool, error)           { return l.get().TryNext() }
func (l *lazySource) Buffered() int {
	if l.src == nil {
		return 0
	}
	return l.src.Buffered()
}

func (l *lazySource) park(wake func()) (*Parked, bool) {
	if l.src == nil {
		return nil, false
	}
	return parkOf(l.src, wake)
}

func (l *lazySource) Close() {
	if l.src != nil {
		l.src.Close()
	}
}

// chainSource reads its sources in order; a source ends with io.EOF.
type chainSource struct{ srcs []txnSource }

func chain(srcs ...txnSource) txnSource {
	if len(srcs) == 1 {
		return srcs[0]
	}
	return &chainSource{srcs: srcs}
}

func (c *chainSource) Next(ctx context.Context) (*source.Txn, error) {
	for {
		t, err := c.srcs[0].Next(ctx)
		if err == io.EOF && len(c.srcs) > 1 {
			c.srcs[0].Close()
			c.srcs = c.srcs[1:]
			continue
		}
		return t, err
	}
}

func (c *chainSource) TryNext() (*source.Txn, bool, error) {
	for {
		t, ok, err := c.srcs[0].TryNext()
		if err == io.EOF && len(c.srcs) > 1 {
			c.srcs[0].Close()
			c.srcs = c.srcs[1:]
			continue
		}
		return t, ok, err
	}
}

func (c *chainSource) Buffered() int { return c.srcs[0].Buffered() }

// park: only the last source can be waited on; an earlier one ends with
// io.EOF, which a read must see to move on — except a fixed source with
// nothing left (a reader from "now" has read its first position), which
// is passed here as a read would.
func (c *chainSource) park(wake func()) (*Parked, bool) {
	for len(c.srcs) > 1 {
		s, ok := c.srcs[0].(*sliceSource)
		if !ok || len(s.txns) > 0 {
			return nil, false
		}
		c.srcs = c.srcs[1:]
	}
	return parkOf(c.srcs[0], wake)
}

// followsTail reports whether src reads the stream's tail (rather than a
// VStream of its own) at its next read: as park sees it, earlier sources of
// a chain that are spent fixed ones do not count.
func followsTail(src txnSource) bool {
	switch s := src.(type) {
	case *followSource:
		return s.onTail()
	case *chainSource:
		for _, e := range s.srcs[:len(s.srcs)-1] {
			if f, ok := e.(*sliceSource); !ok || len(f.txns) > 0 {
				return false
			}
		}
		return followsTail(s.srcs[len(s.srcs)-1])
	}
	return false
}

func (c *chainSource) cursorToken() string {
	if ts, ok := c.srcs[0].(tokenSource); ok {
		return ts.cursorToken()
	}
	return ""
}

func (c *chainSource) sharedDelivery() *Delivery {
	if ts, ok := c.srcs[0].(tokenSource); ok {
		return ts.sharedDelivery()
	}
	return nil
}

func (c *chainSource) Close() {
	for _, s := range c.srcs {
		s.Close()
	}
}

// errSource fails every read with err (a rebuild that found no way on).
type errSource struct{ err error }

func (e *errSource) Next(context.Context) (*source.Txn, error) { return nil, e.err }
func (e *errSource) TryNext() (*source.Txn, bool, error)       { return nil, false, e.err }
func (e *errSource) Buffered() int                             { return 0 }
func (e *errSource) Close()                                    {}
