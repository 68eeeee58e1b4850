package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// Cursors stores named subscribers' positions. A position is written only
// when the subscriber confirms delivery (an ack), never when events are sent.
//
// It also remembers the last position it wrote for each subscriber (see
// restore.go): if the store loses its data, what this replica wrote can be
// written back.
type Cursors struct {
	st    store.Store
	known knownCursors
}

// NewCursors returns the subscriber cursor repository over st.
func NewCursors(st store.Store) *Cursors { return &Cursors{st: st} }

// SubscriberState is what is stored per subscriber.
type SubscriberState struct {
	Name    string              `json:"name"`
	VGtid   *binlogdatapb.VGtid `json:"-"`
	RawPos  []byte              `json:"vgtid"`
	AckedAt time.Time           `json:"acked_at"`
	// Bridges carry the subscriber across reshards that happened while it
	// was away: replay each spool in order, then continue from the last
	// bridge's After position. Package bridge makes them.
	Bridges []Bridge `json:"bridges,omitempty"`
	// Freed are bridges the subscriber acked past, their spools kept for
	// spoolGrace (FreedAt on) for its other readers still replaying them
	// (another tab, another replica): see freeBridges.
	Freed []Bridge `json:"freed,omitempty"`
	// Scope is the table scope the subscriber was created with (nil in
	// states stored before scopes were): see subscope.go.
	Scope *Scope `json:"scope,omitempty"`
}

// Bridge is one captured crossing of a reshard cutover.
type Bridge struct {
	Journal string `json:"journal"` // reshard.Journal key
	Log     string `json:"log"`     // spool log
	From    []byte `json:"from"`    // position the spool starts after (protobuf VGtid)
	After   []byte `json:"after"`   // position after the spool, on the new shards
	Events  int    `json:"events"`
	Bytes   int    `json:"bytes"`
	// Seq is the spool's last sequence number: a reader that finds fewer
	// entries finds it deleted (spool.go). Absent in bridges recorded
	// before it was kept.
	Seq uint64 `json:"seq,omitempty"`
	// FreedAt is when the bridge was acked past (in Freed only).
	FreedAt time.Time `json:"freed_at,omitzero"`
	// Notice is the control event a reader online across the cutover got
	// (`reshard` or `moved`): a reader of the spool gets it at the spool's
	// end, once. Absent in bridges recorded before notices were kept.
	Notice *BridgeNotice `json:"notice,omitempty"`
}

// BridgeNotice is a control event kept with a bridge.
type BridgeNotice struct {
	Type     event.Type     `json:"type"`
	Keyspace string         `json:"keyspace"`
	Fields   map[string]any `json:"fields"`
}

func cursorNS(stream string) string { return "subscribers/" + stream }

// spooled reports whether s has spools a reader may replay: bridges, or
// freed bridges whose spools are kept a while (see freeBridges).
func (s *SubscriberState) spooled() bool { return len(s.Bridges) > 0 || len(s.Freed) > 0 }

// Get returns the subscriber's stored state, or store.ErrNotFound.
func (c *Cursors) Get(ctx context.Context, stream, sub string) (*SubscriberState, error) {
	b, err := c.st.Get(ctx, cursorNS(stream), sub)
	if err != nil {
		return nil, err
	}
	return decodeState(sub, b)
}

func decodeState(sub string, b []byte) (*SubscriberState, error) {
	s := &SubscriberState{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("subscriber %s: corrupt state: %w", sub, err)
	}
	s.Name = sub
	pos, err := position.Unmarshal(s.RawPos)
	if err != nil {
		return nil, fmt.Errorf("subscriber %s: %w", sub, err)
	}
	s.VGtid = pos.VGtid()
	return s, nil
}

// Ack stores pos as the subscriber's cursor unless the stored one is already
// ahead of it on every shard (a late or repeated ack must not move a cursor
// back and cause repeats). It returns the position now stored. The rest of
// the state (bridges still needed until acked past, see plan) is kept,
// whatever was written since it was read (update).
func (c *Cursors) Ack(ctx context.Context, stream, sub string, pos *binlogdatapb.VGtid) (*binlogdatapb.VGtid, error) {
	st, err := c.update(ctx, stream, sub, nil, ackChange(sub, pos))
	if err != nil {
		return nil, err
	}
	return st.VGtid, nil
}

// AckFenced is Ack for a subscriber owned by a lease holder (a webhook
// deliverer): the write succeeds only while lease is held with token, so a
// paused or partitioned former holder cannot move the cursor back.
func (c *Cursors) AckFenced(ctx context.Context, stream, sub string, pos *binlogdatapb.VGtid, lease string, token uint64) error {
	_, err := c.update(ctx, stream, sub, &store.Lease{Name: lease, Token: token}, ackChange(sub, pos))
	return err
}

// ackChange is an ack of pos as a change of the subscriber's state.
func ackChange(sub string, pos *binlogdatapb.VGtid) func(*SubscriberState) (*SubscriberState, error) {
	return func(cur *SubscriberState) (*SubscriberState, error) {
		if cur == nil {
			cur = &SubscriberState{Name: sub}
		} else if position.Of(pos).Compare(position.Of(cur.VGtid)) == position.Before {
			return nil, nil
		}
		cur.VGtid, cur.AckedAt = pos, time.Now().UTC()
		freePassed(cur, cur.AckedAt)
		return cur, nil
	}
}

// freePassed moves the bridges the acked position is at or past the end
// of (and those before them in the chain) to the freed ones. A subscriber
// online across a cutover reads on from the tail while a bridge is made
// for it and acks past it: no plan runs at its cursor to free the bridge,
// which stayed in the chain, the next bridge was captured from its end
// (spooling again what was acked) and a plan walked the chain from there
// (DESIGN §4 rule 3).
func freePassed(cur *SubscriberState, now time.Time) {
	at := position.Of(cur.VGtid)
	n := 0
	for i, b := range cur.Bridges {
		if after, err := position.Unmarshal(b.After); err == nil && atOrPast(at, after) {
			n = i + 1
		}
	}
	for _, b := range cur.Bridges[:n] {
		b.FreedAt = now
		cur.Freed = append(cur.Freed, b)
	}
	cur.Bridges = cur.Bridges[n:]
}

// List returns every subscriber of stream.
func (c *Cursors) List(ctx context.Context, stream string) ([]*SubscriberState, error) {
	recs, err := c.st.List(ctx, cursorNS(stream))
	if err != nil {
		return nil, err
	}
	out := make([]*SubscriberState, 0, len(recs))
	for _, r := range recs {
		s, err := decodeState(r.Key, r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Delete forgets a subscriber.
func (c *Cursors) Delete(ctx context.Context, stream, sub string) error {
	c.known.forget(stream, sub)
	return c.st.Delete(ctx, cursorNS(stream), sub)
}

// DeleteAll forgets every subscriber of stream (the stream was deleted).
func (c *Cursors) DeleteAll(ctx context.Context, stream string) error {
	recs, err := c.st.List(ctx, cursorNS(stream))
	if err != nil {
		return err
	}
	c.known.forgetStream(stream)
	for _, r := range recs {
		if err := c.st.Delete(ctx, cursorNS(stream), r.Key); err != nil {
			return err
		}
	}
	return nil
}
