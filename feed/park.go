package feed

import (
	"context"

	"github.com/vstream-gateway/vstream-gateway/hub"
)

// ParkedError ends a read whose subscription had nothing to read and was
// parked on the stream's tail instead of blocking (Parking): the tail's
// next append runs the wake function given to Parking, and the reader
// reads on from there. A connection idle at the live end so holds no
// goroutine (DESIGN §6.1).
type ParkedError struct{ Parked *hub.Parked }

func (*ParkedError) Error() string { return "feed: subscription parked on the tail" }

// Parking is a Reader of s that parks s on its tail, with wake to run at
// the tail's next append, and reports *ParkedError from Next instead of
// blocking when it can: when nothing is ready and s follows the tail.
// A subscription that cannot park (a catch-up VStream, a spool, a copy
// phase) is waited on as usual.
func Parking(s *hub.Subscription, wake func()) Reader { return parking{s, wake} }

type parking struct {
	s    *hub.Subscription
	wake func()
}

func (p parking) Next(ctx context.Context) (*hub.Delivery, error) {
	// Park first: it holds only when nothing is ready, and Next, not
	// TryNext, is what makes a catch-up try to join the tail.
	if parked, ok := p.s.Park(p.wake); ok {
		return nil, &ParkedError{Parked: parked}
	}
	return p.s.Next(ctx)
}

func (p parking) TryNext(ctx context.Context) (*hub.Delivery, bool, error) {
	return p.s.TryNext(ctx)
}
