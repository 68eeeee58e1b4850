package handlers

import (
	"context"
	"errors"
	"time"

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
}

// pump copies a subscription into a sink until ctx ends or either side
// fails. Idle clients get a heartbeat every interval.
func pump(ctx context.Context, s *hub.Subscription, out sink, interval time.Duration) error {
	lastSent := time.Now()
	cursor := ""
	for {
		wctx, cancel := context.WithDeadline(ctx, lastSent.Add(interval))
		d, err := s.Next(wctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			if cursor == "" {
				if cursor, err = s.Cursor(ctx); err != nil {
					return err
				}
			}
			if cursor != "" {
				if err := out.heartbeat(cursor); err != nil {
					return err
				}
			}
			lastSent = time.Now()
			continue
		default:
			return err
		}
		cursor = d.Cursor
		if len(d.Events) == 0 {
			continue // position-only: the next heartbeat carries it
		}
		if err := out.deliver(d, s.Buffered() > 0); err != nil {
			return err
		}
		lastSent = time.Now()
	}
}
