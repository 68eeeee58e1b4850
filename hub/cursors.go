package hub

import (
	"context"
	"encoding/json"
	"errors"
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
	// bridge's After position. See bridge.go.
	Bridges []Bridge `json:"bridges,omitempty"`
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

// put writes a subscriber state.
func (c *Cursors) put(ctx context.Context, stream string, s *SubscriberState) error {
	return c.putFenced(ctx, stream, s, nil)
}

// putFenced is put, refused (store.ErrFenced) unless fence is nil or
// still held.
func (c *Cursors) putFenced(ctx context.Context, stream string, s *SubscriberState, fence *store.Lease) error {
	raw, err := position.Of(s.VGtid).Marshal()
	if err != nil {
		return err
	}
	s.RawPos = raw
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if fence != nil {
		err = c.st.PutFenced(ctx, cursorNS(stream), s.Name, b, fence.Name, fence.Token)
	} else {
		err = c.st.Put(ctx, cursorNS(stream), s.Name, b)
	}
	if err != nil {
		return fmt.Errorf("store cursor: %w", err)
	}
	c.known.remember(stream, s.Name, s.VGtid)
	return nil
}

func cursorNS(stream string) string { return "subscribers/" + stream }

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
// back and cause repeats). It returns the position now stored.
func (c *Cursors) Ack(ctx context.Context, stream, sub string, pos *binlogdatapb.VGtid) (*binlogdatapb.VGtid, error) {
	st := &SubscriberState{Name: sub}
	if old, err := c.Get(ctx, stream, sub); err == nil {
		if position.Of(pos).Compare(position.Of(old.VGtid)) == position.Before {
			return old.VGtid, nil
		}
		st.Bridges = old.Bridges // still needed until acked past (see plan)
		st.Scope = old.Scope
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	st.VGtid, st.AckedAt = pos, time.Now().UTC()
	if err := c.put(ctx, stream, st); err != nil {
		return nil, err
	}
	return pos, nil
}

// AckFenced is Ack for a subscriber owned by a lease holder (a webhook
// deliverer): the write succeeds only while lease is held with token, so a
// paused or partitioned former holder cannot move the cursor back.
func (c *Cursors) AckFenced(ctx context.Context, stream, sub string, pos *binlogdatapb.VGtid, lease string, token uint64) error {
	st := &SubscriberState{Name: sub}
	if old, err := c.Get(ctx, stream, sub); err == nil {
		if position.Of(pos).Compare(position.Of(old.VGtid)) == position.Before {
			return nil
		}
		st.Bridges = old.Bridges
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	st.VGtid, st.AckedAt = pos, time.Now().UTC()
	raw, err := position.Of(pos).Marshal()
	if err != nil {
		return err
	}
	st.RawPos = raw
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return c.st.PutFenced(ctx, cursorNS(stream), sub, b, lease, token)
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
