package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
)

// sink receives what a push transport (SSE, WebSocket) sends.
type sink interface {
	// deliver sends the events of one transaction. more reports whether
	// another delivery is ready, so the sink can defer flushing.
	deliver(d *hub.Delivery, more bool) error
	// heartbeat tells an idle client its cursor (which moves even when the
	// filter drops every row) and keeps proxies from closing the connection.
	heartbeat(cursor string) error
	// flushHeld sends what deliver held back because more was ready: the
	// pump calls it before it waits (feed.BeforeWait), since the ready
	// transactions may all have been ones that send nothing.
	flushHeld() error
}

// pump copies a subscription into a sink until ctx ends or either side
// fails, a transaction at a time as it comes. Idle clients get a heartbeat
// every interval.
func pump(ctx context.Context, s *hub.Subscription, out sink, interval time.Duration) error {
	return pumpFeed(ctx, s, s, out, interval)
}

// pumpFeed is pump reading s through f (a WebSocket's feed.Parking).
func pumpFeed(ctx context.Context, f feed.Reader, s *hub.Subscription, out sink, interval time.Duration) error {
	c := feed.NewCollector(f, feed.IdleEvery(interval), feed.BeforeWait(out.flushHeld))
	for {
		d, err := c.Next(ctx)
		if errors.Is(err, feed.ErrIdle) {
			if err := heartbeat(ctx, s, out); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := out.deliver(d, s.Buffered() > 0); err != nil {
			return err
		}
	}
}

// heartbeat tells an idle client its cursor. The cursor moves even when
// nothing is sent: position-only transactions are passed over, the
// heartbeat carries their cursor.
func heartbeat(ctx context.Context, s *hub.Subscription, out sink) error {
	cursor, err := s.Cursor(ctx)
	if err != nil || cursor == "" {
		return err
	}
	return out.heartbeat(cursor)
}
