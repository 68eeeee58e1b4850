package handlers

import (
	"time"

	"github.com/vstream-gateway/vstream-gateway/hub"
)

// A WebSocket whose client has read everything and whose subscription
// follows the stream's tail — a dashboard between changes, most
// connections most of the time — needs no goroutine of its own for the
// stream: its subscription is parked on the tail, and the tail's next
// append kicks the writer (wswriter.go), which reads what came itself
// (DESIGN §6.1, feed.Parking). The producer goroutine runs only while the subscription
// can be waited on in Next alone (a catch-up VStream, a spool, a copy
// phase) and while the client is behind (the queue is full): it then keeps
// the slow-consumer policy exactly as before, blocking on the full queue
// for --ws-slow-after before the client gets 4008.

// heartbeatDue is how long until a parked client is due a heartbeat, or -1
// without heartbeats.
func (ws *wsSession) heartbeatDue() time.Duration {
	every := ws.a.WebSocketConfig.CursorHeartbeat
	if every <= 0 {
		return -1
	}
	return max(time.Until(ws.idleFrom.Add(every)), 0)
}

// armBeat sets the heartbeat timer of a parked subscription.
func (ws *wsSession) armBeat() {
	d := ws.heartbeatDue()
	if d < 0 {
		return
	}
	if ws.beat == nil {
		ws.beat = time.AfterFunc(d, func() {
			ws.beatDue.Store(true)
			ws.writer.kickHere(ws.write)
		})
		return
	}
	ws.beat.Reset(d)
}

// stopBeat stops the heartbeat timer (the subscription is no longer
// parked).
func (ws *wsSession) stopBeat() {
	if ws.beat != nil {
		ws.beat.Stop()
	}
}

// startProducer hands the subscription to a producer goroutine.
func (ws *wsSession) startProducer(pending *hub.Delivery) {
	ws.producing = true
	go ws.produce(pending)
}

// drain reads what the tail woke the parked subscription for, as the
// producer would (transactions without events, and heartbeats, only move
// the position), into the queue without blocking. It parks again when the
// subscription is at the tail's head, and starts the producer when the
// queue is full or the subscription can no longer be parked.
func (ws *wsSession) drain() {
	// The registration has run (or this is a late wake-up of an earlier
	// one): withdraw it, if it is still there, before making a new one.
	ws.parked.Stop()
	ws.parked = nil
	defer ws.o.flushTally() // one metrics update for what this wake-up delivers
	var now time.Time       // and one clock read
	for {
		d, ok, err := ws.s.TryNext(ws.ctx)
		if err != nil {
			ws.stopBeat()
			ws.ended(err)
			return
		}
		if !ok {
			break
		}
		if d.Heartbeat || len(d.Events) == 0 {
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		ws.idleFrom = now
		d = ws.o.applyAt(d, now, true)
		if !ws.sink.tryDeliver(d) {
			// The queue is full: the producer takes over with d and
			// blocks on the queue, so that a client that stays behind
			// for --ws-slow-after gets 4008.
			ws.stopBeat()
			ws.startProducer(d)
			return
		}
	}
	parked, ok := ws.s.Park(ws.wake)
	if !ok {
		ws.stopBeat()
		ws.startProducer(nil)
		return
	}
	ws.parked = parked
	ws.armBeat()
}

// parkedHeartbeat tells an idle parked client its cursor, as the
// producer's OnIdle does.
func (ws *wsSession) parkedHeartbeat() {
	if d := ws.heartbeatDue(); d != 0 {
		// A wake-up of a timer set before the client was last sent
		// something: not due yet.
		if d > 0 {
			ws.beat.Reset(d)
		}
		return
	}
	cursor, err := ws.s.Cursor(ws.ctx)
	if err != nil {
		ws.stopBeat()
		ws.ended(err)
		return
	}
	if cursor != "" {
		// A queue still full of earlier messages tells the client enough.
		ws.sink.tryHeartbeat(cursor)
	}
	ws.idleFrom = time.Now()
	ws.armBeat()
}

// wakeOnTail is the parked subscription's wake-up, run on the tail's
// goroutine after its append. Most wake-ups of an idle connection bring
// only vtgate's heartbeat (every second), which moves the position and
// sends nothing: the writer's part of that is a few reads of the ring and
// parking again, which the tail's goroutine does itself (without
// blocking) rather than start a goroutine per connection each second —
// every parked connection at once, each with a stack. Whatever may block
// (a write, a close, the producer's exit, a timer's work) goes to a
// writer goroutine as before.
func (ws *wsSession) wakeOnTail() {
	ws.woken.Store(true)
	if !ws.writer.claim() {
		ws.writer.kick() // a writer runs: it looks again
		return
	}
	defer func() {
		if v := recover(); v != nil {
			ws.recoverPanicValue(v)
			ws.cancel()
			go ws.write() // ends the session
		}
	}()
	for {
		ws.writer.look()
		if ws.mayBlock() {
			go ws.write()
			return
		}
		if ws.woken.Swap(false) {
			ws.drain()
			continue
		}
		if ws.queue.len() > 0 {
			if !ws.writeNow() {
				go ws.write()
				return
			}
			continue
		}
		if ws.writer.rest() {
			return
		}
	}
}

// mayBlock reports whether the writer has work that may block or is not
// the parked read or a write the socket takes at once: a writer goroutine
// does it.
func (ws *wsSession) mayBlock() bool {
	return ws.producing || ws.ctx.Err() != nil || len(ws.closing) > 0 || ws.a.shutdown().Err() != nil ||
		ws.pingDue.Load() || ws.beatDue.Load()
}
