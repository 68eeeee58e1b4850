package handlers

import (
	"context"
	"time"

	"github.com/vstream-gateway/vstream-gateway/hub"
)

// A WebSocket whose client has read everything and whose subscription
// follows the stream's tail — a dashboard between changes, most
// connections most of the time — needs no goroutine of its own for the
// stream: the writer, which waits for the queue anyway, waits on the
// tail's wake-up channel too, and reads what comes itself (DESIGN §6.1).
// The producer goroutine runs only while the subscription can be waited
// on in Next alone (a catch-up VStream, a spool, a copy phase) and while
// the client is behind (the queue is full): it then keeps the slow-consumer
// policy exactly as before, blocking on the full queue for --ws-slow-after
// before the client gets 4008.

// errParked ends a producer whose subscription has nothing to read and
// can be parked on the tail.
type errParked struct{ wake <-chan struct{} }

func (*errParked) Error() string { return "websocket subscription parked on the tail" }

// parkFeed is the producer's view of the subscription: it reports
// errParked instead of blocking when the subscription can be parked.
type parkFeed struct{ s *hub.Subscription }

func (p parkFeed) Next(ctx context.Context) (*hub.Delivery, error) {
	// Park first: it holds only when nothing is ready, and Next, not
	// TryNext, is what makes a catch-up try to join the tail.
	if wake, ok := p.s.Park(); ok {
		return nil, &errParked{wake: wake}
	}
	return p.s.Next(ctx)
}

func (p parkFeed) TryNext(ctx context.Context) (*hub.Delivery, bool, error) {
	return p.s.TryNext(ctx)
}

// parked is the writer's wait on a parked subscription: the tail's wake-up
// channel, and the timer of the next cursor heartbeat. Nil channels (not
// parked) never fire.
type parked struct {
	wake  <-chan struct{}
	timer *time.Timer
	armed bool
}

// wait parks on wake, with a heartbeat due in d (none when d < 0).
func (p *parked) wait(wake <-chan struct{}, d time.Duration) {
	p.wake = wake
	if d < 0 {
		p.stopTimer()
		return
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	p.armed = true
}

func (p *parked) heartbeat() <-chan time.Time {
	if !p.armed {
		return nil
	}
	return p.timer.C
}

func (p *parked) stopTimer() {
	if p.armed {
		p.timer.Stop()
		p.armed = false
	}
}

func (p *parked) stop() {
	p.wake = nil
	p.stopTimer()
}

// heartbeatDue is how long until a parked client is due a heartbeat, or -1
// without heartbeats.
func (ws *wsSession) heartbeatDue() time.Duration {
	every := ws.a.Limits.CursorHeartbeat
	if every <= 0 {
		return -1
	}
	return max(time.Until(ws.idleFrom.Add(every)), 0)
}

// startProducer hands the subscription to a producer goroutine.
func (ws *wsSession) startProducer(pending *hub.Delivery) {
	ws.producing = true
	go ws.produce(pending)
}

// drain reads what the tail woke the parked writer for, as the producer
// would (transactions without events, and heartbeats, only move the
// position), into the queue without blocking. It parks again when the
// subscription is at the tail's head, and starts the producer when the
// queue is full or the subscription can no longer be parked.
func (ws *wsSession) drain(p *parked) {
	for {
		d, ok, err := ws.s.TryNext(ws.ctx)
		if err != nil {
			p.stop()
			ws.ended(err)
			return
		}
		if !ok {
			break
		}
		if d.Heartbeat || len(d.Events) == 0 {
			continue
		}
		ws.idleFrom = time.Now()
		d = ws.o.apply(d)
		if !ws.sink.tryDeliver(d) {
			p.stop()
			ws.startProducer(d)
			return
		}
	}
	wake, ok := ws.s.Park()
	if !ok {
		p.stop()
		ws.startProducer(nil)
		return
	}
	p.wait(wake, ws.heartbeatDue())
}

// parkedHeartbeat tells an idle parked client its cursor, as the
// producer's OnIdle does.
func (ws *wsSession) parkedHeartbeat(p *parked) {
	p.armed = false // fired
	cursor, err := ws.s.Cursor(ws.ctx)
	if err != nil {
		p.stop()
		ws.ended(err)
		return
	}
	if cursor != "" {
		// A queue still full of earlier messages tells the client enough.
		ws.sink.tryHeartbeat(cursor)
	}
	ws.idleFrom = time.Now()
	p.wait(p.wake, ws.heartbeatDue())
}
