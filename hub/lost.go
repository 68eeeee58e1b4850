package hub

import (
	"context"
	"time"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Resync reasons, the "reason" of a resync event.
const (
	// ResyncShardsGone: the cursor's shards are gone and no recorded
	// journal continues it exactly (DESIGN §4 rule 4).
	ResyncShardsGone = "shards_gone"
	// ResyncStoreLost: the store lost data the resume needed — the named
	// subscriber's cursor, or the journals of a reshard (DESIGN §12).
	ResyncStoreLost = "store_lost"
)

// DefaultLossWindow is how long after the store lost data a named
// subscriber without a stored cursor is taken for one whose cursor was
// lost (WithStoreLoss).
const DefaultLossWindow = 7 * 24 * time.Hour

// storeLost returns when the store lost data, if that is within the window.
func (h *Hub) storeLost() (time.Time, bool) {
	if h.lostAt == nil {
		return time.Time{}, false
	}
	t := h.lostAt()
	return t, !t.IsZero() && time.Since(t) < h.lossWindow
}

// resyncReason is the reason of a resync for shards that are gone.
func (h *Hub) resyncReason() string {
	if _, lost := h.storeLost(); lost {
		return ResyncStoreLost
	}
	return ResyncShardsGone
}

// lostCursor opens a subscription for a named subscriber whose cursor may
// have been lost with the store's data: a resync notice, then a fresh
// snapshot and the live stream.
func (h *Hub) lostCursor(ctx context.Context, def *streams.Definition, sub string, lostAt time.Time) (*Subscription, error) {
	live := StartPosition(&streams.Definition{Keyspace: def.Keyspace, Start: streams.StartSnapshot})
	notice := event.Control(event.TypeResync, def.Keyspace, "", map[string]any{
		"reason":     ResyncStoreLost,
		"subscriber": sub,
		"lost_at":    lostAt.UTC().Format(time.RFC3339),
		"message":    "the store lost data at lost_at and has no cursor for this subscriber: if it read this stream before, its cursor was lost. A fresh snapshot follows: discard what you derived from earlier events",
	})
	metrics.LostCursorResync()
	h.log.Warn("named subscriber without a stored cursor after the store lost data: sending a resync (store_lost) and a fresh snapshot",
		"stream", def.Name, "subscriber", sub, "lost_at", lostAt)
	src := chain(&sliceSource{txns: []*source.Txn{{VGtid: live, Events: []event.Event{notice}}}}, h.follow(def, live))
	s := h.newSubscription(def, live, "", src)
	s.subscriber = sub
	return s, nil
}
