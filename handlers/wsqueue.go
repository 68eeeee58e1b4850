package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/budget"
)

// wsMessage is one item of a WebSocket's send queue: a ready message, or
// a whole transaction whose events the writer encodes and sends one
// message each. Handing over transactions rather than messages spares a
// channel operation and an allocation per event: the writer encodes into
// one reused buffer.
type wsMessage struct {
	data   []byte
	txn    *hub.Delivery
	cursor string // set when the item ends a transaction
	weight int    // bytes held in the queue's budget until written
}

var errSlowConsumer = errors.New("slow consumer")

// wsSink is the producer's end of a WebSocket's send queue.
type wsSink struct {
	ctx   context.Context
	queue *wsQueue
	// bytes bounds the queue in bytes as well as in items: a few bulk
	// transactions must not hold a backlog's worth of memory.
	bytes *budget.Bytes
	// slowAfter is how long a full queue may stay full before the client
	// counts as slow: a replaying client that reads steadily is throttled
	// (the VStream waits), only one that stops reading is cut off.
	slowAfter time.Duration
}

func (s *wsSink) push(m wsMessage) error {
	held := s.bytes.TryAcquire(m.weight)
	if held && s.queue.tryPush(m) {
		return nil
	}
	// The client is behind; it may stay behind for slowAfter.
	ctx, cancel := context.WithTimeout(s.ctx, s.slowAfter)
	defer cancel()
	if !held {
		if err := s.bytes.Acquire(ctx, m.weight); err != nil {
			return s.gaveUp()
		}
	}
	if err := s.queue.push(ctx, m); err != nil {
		s.bytes.Release(m.weight)
		return s.gaveUp()
	}
	return nil
}

// tryPush queues m only if there is room now.
func (s *wsSink) tryPush(m wsMessage) bool {
	if !s.bytes.TryAcquire(m.weight) {
		return false
	}
	if !s.queue.tryPush(m) {
		s.bytes.Release(m.weight)
		return false
	}
	return true
}

// gaveUp tells a slow consumer from a connection that ended meanwhile.
func (s *wsSink) gaveUp() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	return errSlowConsumer
}

// deliver queues a whole transaction; the writer encodes it (into one
// reused buffer, sparing an allocation and a channel operation per event).
func (s *wsSink) deliver(d *hub.Delivery, _ bool) error {
	return s.push(wsMessage{txn: d, cursor: d.Cursor, weight: d.Weight()})
}

func (s *wsSink) heartbeat(cursor string) error {
	return s.push(heartbeatMessage(cursor))
}

// flushHeld holds nothing: the writer goroutine flushes once its queue is
// empty.
func (s *wsSink) flushHeld() error { return nil }

// tryDeliver and tryHeartbeat queue without waiting (the parked writer).
func (s *wsSink) tryDeliver(d *hub.Delivery) bool {
	return s.tryPush(wsMessage{txn: d, cursor: d.Cursor, weight: d.Weight()})
}

func (s *wsSink) tryHeartbeat(cursor string) bool { return s.tryPush(heartbeatMessage(cursor)) }

func heartbeatMessage(cursor string) wsMessage {
	data := []byte(`{"type":"heartbeat","cursor":"` + cursor + `"}`)
	return wsMessage{data: data, cursor: cursor, weight: len(data)}
}
