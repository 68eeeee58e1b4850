package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// From says where a reader starts: an explicit cursor token wins, then the
// named subscriber's stored cursor, then the stream's start.
type From struct {
	Token      string
	Subscriber string
	// Start overrides the stream's start ("now" or "snapshot") for a reader
	// with neither a cursor nor a stored one: the console's live table
	// starts at the live end of a snapshot stream, whose current rows it
	// pages through beside it (DESIGN §13).
	Start string
}

// bridgeLookup bounds the look-up of a subscriber's bridges when it
// presents a cursor of its own (DESIGN §12.1).
const bridgeLookup = time.Second

// CursorError is a token that cannot be used (malformed, forged, foreign).
type CursorError struct{ Err error }

func (e *CursorError) Error() string { return e.Err.Error() }
func (e *CursorError) Unwrap() error { return e.Err }

// Open returns a subscription on def positioned per from. Before the VStream
// is opened the position is checked against the keyspace's shards and, if
// the reshard rules require it, rebuilt (plan.go, with the decisions of
// reshard/rebuild.go).
func (h *Hub) Open(ctx context.Context, def *streams.Definition, from From) (*Subscription, error) {
	at, lost, err := h.startAt(ctx, def, from)
	if err != nil || lost != nil {
		return lost, err
	}
	if at.token != "" {
		if s := h.unpark(def.Name, from.Subscriber, at.token); s != nil {
			// A subscriber with bridges is planned afresh: a subscription
			// parked before they were recorded would read on without
			// its spools (DESIGN §6, §4 rule 3).
			if sameDefinition(s.def, def) && (at.state == nil || len(at.state.Bridges) == 0) {
				return s, nil
			}
			s.close()
		}
	}
	if at.pos == nil {
		o := *def
		if from.Start != "" {
			o.Start = from.Start
		}
		at.pos = StartPosition(&o)
	}
	src, err := h.plan(ctx, def, at.pos, at.state, at.skip)
	if err != nil {
		return nil, err
	}
	if at.skip == 0 {
		sub := h.newSubscription(def, at.pos, at.token, src)
		sub.subscriber = from.Subscriber
		return sub, nil
	}
	// The subscription's cursor is the one before the transaction until
	// its end; the token it was opened with is where it is.
	before, err := h.Token(ctx, def, at.pos)
	if err != nil {
		src.Close()
		return nil, err
	}
	sub := h.newSubscription(def, at.pos, before, src)
	sub.subscriber, sub.inTxn, sub.resumeTok = from.Subscriber, at.skip, at.token
	return sub, nil
}

// start is where a reader starts, before any rebuild: nil pos is the
// stream's start.
type start struct {
	pos   *binlogdatapb.VGtid
	token string
	state *SubscriberState // the named subscriber's, when its bridges apply
	skip  int              // events of the transaction after pos the reader has
}

// startAt finds where a reader starts: its cursor token, else its stored
// cursor. A subscriber whose cursor the store lost gets the subscription
// that says so (lostCursor) instead.
func (h *Hub) startAt(ctx context.Context, def *streams.Definition, from From) (start, *Subscription, error) {
	at := start{token: from.Token}
	switch {
	case from.Token != "":
		v, n, err := h.codec.DecodeIn(ctx, scope(def), from.Token)
		if err != nil {
			return at, nil, &CursorError{Err: err}
		}
		at.pos, at.skip = v, n
		if from.Subscriber != "" {
			// The subscriber's bridges still apply to an explicit cursor
			// inside them. A store that does not answer quickly cannot
			// serve a spool either: the reader goes on without (a cursor
			// whose shards are gone then resyncs, said out loud).
			bctx, cancel := context.WithTimeout(ctx, bridgeLookup)
			if st, err := h.cursors.Get(bctx, def.Name, from.Subscriber); err == nil && st.spooled() {
				at.state = st
			}
			cancel()
		}
	case from.Subscriber != "":
		st, err := h.cursors.Get(ctx, def.Name, from.Subscriber)
		switch {
		case err == nil:
			at.pos, at.state = st.VGtid, st
			if at.token, err = h.Token(ctx, def, at.pos); err != nil {
				return at, nil, err
			}
		case errors.Is(err, store.ErrNotFound):
			if lostAt, lost := h.storeLost(); lost {
				s, err := h.lostCursor(ctx, def, from.Subscriber, lostAt)
				return at, s, err
			}
		default:
			return at, nil, fmt.Errorf("load subscriber %s: %w", from.Subscriber, err)
		}
	}
	return at, nil, nil
}

// Cursors returns the subscriber cursor repository.
func (h *Hub) Cursors() *Cursors { return h.cursors }

// scope binds tokens to a stream definition: a token minted for a stream is
// refused by another stream, and by a stream recreated under the same name
// on another keyspace. A stream whose tables moved keeps its origin
// keyspace's scope: its cursors from before the move stay valid.
func scope(def *streams.Definition) string { return def.Name + "\x00" + def.Origin() }

// Token returns the cursor token for pos on def.
func (h *Hub) Token(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid) (string, error) {
	return h.codec.Encode(ctx, scope(def), pos)
}

// Position decodes a cursor token of def.
func (h *Hub) Position(ctx context.Context, def *streams.Definition, token string) (*binlogdatapb.VGtid, error) {
	return h.codec.Decode(ctx, scope(def), token)
}
