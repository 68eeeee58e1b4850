package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// ErrStateContended is returned when a subscriber's state changed between
// the read and the write of every attempt to update it.
var ErrStateContended = errors.New("subscriber state kept changing under the update")

// maxStateAttempts bounds an update's read-compute-swap rounds. A
// subscriber's state is written by its acks (a few tabs, a few replicas),
// its bridges and the freeing of its spools: a handful of writers, each
// of which wins a round.
const maxStateAttempts = 32

// update changes a subscriber's stored state: it reads it, lets change
// compute the next one from it (cur is nil when there is none; change may
// modify and return it), and writes that with a compare-and-swap against
// what it read. A write that came in between (an ack beside a bridge, a
// bridge beside an ack, another replica's ack) makes the swap fail, and it
// starts again from the state now stored: no writer overwrites another's
// change with a state it read before. change must depend on cur alone (it
// may run several times) and returns nil to write nothing. With fence the
// write is refused (store.ErrFenced) unless that lease is still held.
//
// It returns the state stored when it ended: the one written, or the one
// change left as it was.
func (c *Cursors) update(ctx context.Context, stream, sub string, fence *store.Lease, change func(cur *SubscriberState) (*SubscriberState, error)) (*SubscriberState, error) {
	ns := cursorNS(stream)
	for attempt := range maxStateAttempts {
		if attempt > 0 {
			if err := conflictPause(ctx, attempt); err != nil {
				return nil, err
			}
		}
		old, err := c.st.Get(ctx, ns, sub)
		var cur *SubscriberState
		switch {
		case err == nil:
			if cur, err = decodeState(sub, old); err != nil {
				return nil, err
			}
		case errors.Is(err, store.ErrNotFound):
			old = nil
		default:
			return nil, err
		}
		next, err := change(cur)
		if err != nil || next == nil {
			return cur, err
		}
		b, err := encodeState(sub, next)
		if err != nil {
			return nil, err
		}
		var swapped bool
		if fence != nil {
			swapped, err = c.st.CompareAndSwapFenced(ctx, ns, sub, old, b, fence.Name, fence.Token)
		} else {
			swapped, err = c.st.CompareAndSwap(ctx, ns, sub, old, b)
		}
		if err != nil {
			return nil, fmt.Errorf("store cursor: %w", err)
		}
		if swapped {
			c.known.remember(stream, sub, next.VGtid)
			return next, nil
		}
	}
	return nil, fmt.Errorf("subscriber %s of %s: %w (%d attempts)", sub, stream, ErrStateContended, maxStateAttempts)
}

// conflictPause spreads writers that keep colliding: none the first time
// (a collision is rare, and the next round usually wins), then a random
// pause that grows with the attempts, up to 16 ms.
func conflictPause(ctx context.Context, attempt int) error {
	if attempt < 2 {
		return ctx.Err()
	}
	return wait.Sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 16))*int64(time.Millisecond))))
}

func encodeState(sub string, s *SubscriberState) ([]byte, error) {
	raw, err := position.Of(s.VGtid).Marshal()
	if err != nil {
		return nil, err
	}
	s.Name, s.RawPos = sub, raw
	return json.Marshal(s)
}
