package handlers

import (
	"cmp"
	"sync/atomic"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// The writer of a WebSocket is a goroutine only while it has something to
// do (DESIGN §6.1). Whatever gives it work — a message queued, the tail's
// append under a parked subscription, the heartbeat timer, the producer's
// exit, a reason to close, the session's end, the gateway's shutdown —
// records it first (in the queue, a flag, a channel) and then kicks the
// writer: kick starts the goroutine when none runs, or tells the running
// one to look again before it stops. One writer at a time, and no work left
// unseen: the writer marks itself running before it looks, and stops only
// by a swap from running to idle, which fails when a kick came meanwhile.

// The writer's states.
const (
	writerIdle    int32 = iota // no writer goroutine: a kick starts one
	writerRunning              // a writer runs and looks for work
	writerKicked               // it runs, and was kicked since it last looked
	writerDone                 // the session is over: kicks do nothing
)

// writerState is the writer's state machine; start runs the writer's
// goroutine (go ws.write, the session's).
type writerState struct {
	state atomic.Int32
	start func()
}

// kick tells the writer that it may have work. It never blocks.
func (w *writerState) kick() {
	for {
		switch w.state.Load() {
		case writerIdle:
			if w.state.CompareAndSwap(writerIdle, writerRunning) {
				w.start()
				return
			}
		case writerRunning:
			if w.state.CompareAndSwap(writerRunning, writerKicked) {
				return
			}
		default: // kicked already, or done
			return
		}
	}
}

// claim makes the caller the writer if none runs.
func (w *writerState) claim() bool { return w.state.CompareAndSwap(writerIdle, writerRunning) }

// kickHere is kick from a goroutine that has nothing else to do (a timer's,
// the producer's as it exits): the writer, if none runs, runs on it
// instead of a goroutine of its own.
func (w *writerState) kickHere(run func()) {
	for {
		switch w.state.Load() {
		case writerIdle:
			if w.state.CompareAndSwap(writerIdle, writerRunning) {
				run()
				return
			}
		case writerRunning:
			if w.state.CompareAndSwap(writerRunning, writerKicked) {
				return
			}
		default:
			return
		}
	}
}

// look is called by the writer before it looks for work: the kicks before
// it are answered by that look.
func (w *writerState) look() { w.state.CompareAndSwap(writerKicked, writerRunning) }

// rest stops the writer if nothing kicked it since it last looked; it
// reports false when the writer must look again.
func (w *writerState) rest() bool { return w.state.CompareAndSwap(writerRunning, writerIdle) }

// done makes every later kick a no-op.
func (w *writerState) done() { w.state.Store(writerDone) }

// write is the writer's goroutine: it works until there is nothing to do,
// and ends the session when it is over.
func (ws *wsSession) write() {
	over := true
	defer func() {
		ws.recoverPanic()
		if over {
			ws.finish()
		}
	}()
	for {
		ws.writer.look()
		worked, end := ws.turn()
		if end {
			return
		}
		if !worked && ws.writer.rest() {
			over = false
			return
		}
	}
}

// turn does what is there to do now, without waiting, most urgent first:
// the session's end, the producer's exit, the parked subscription, a burst
// of the queue. It reports whether it did anything, and whether the
// session is over.
func (ws *wsSession) turn() (worked, over bool) {
	select {
	case <-ws.ctx.Done():
		select {
		case d := <-ws.closing:
			ws.finalClose(d)
		default:
		}
		return true, true
	case d := <-ws.closing:
		ws.finalClose(d)
		return true, true
	case <-ws.a.shutdown().Done():
		metrics.WSDisconnect(DisconnectShutdown.label())
		ws.finalClose(DisconnectShutdown)
		return true, true
	default:
	}
	if ws.producing {
		select {
		case p := <-ws.produced:
			ws.producing = false
			worked = true
			if p != nil {
				ws.parked = p
				ws.idleFrom = time.Now()
				ws.armBeat()
			}
		default:
		}
	}
	if !ws.producing && ws.ctx.Err() == nil {
		if ws.woken.Swap(false) {
			ws.drain()
			worked = true
		}
		if !ws.producing && ws.beatDue.Swap(false) {
			ws.parkedHeartbeat()
			worked = true
		}
	}
	if ws.pingDue.Swap(false) {
		if err := ws.keepAliveTurn(); err != nil {
			return true, true
		}
		worked = true
	}
	n, err := ws.writeBurst()
	if err != nil {
		return true, true
	}
	return worked || n > 0, false
}

// writeBurst writes up to wsBurst queued messages: a burst per turn, not
// one message, since a turn costs more than writing a small message. It
// reports how many it wrote, and a failed write.
func (ws *wsSession) writeBurst() (int, error) {
	queue, conn := ws.queue, ws.conn
	// buf is reused for every message of a burst (encoded here, framed,
	// forgotten) and goes back to encodePool when the queue is empty.
	var buf []byte
	defer func() { putEncodeBuf(buf) }()
	n := 0
	var last string // the cursor of the last transaction handed over
	defer func() { ws.setWritten(last) }()
	for n < wsBurst {
		m, ok := queue.pop()
		if !ok {
			break
		}
		n++
		var err error
		buf, err = ws.frame(&m, buf)
		if err == nil && queue.len() == 0 {
			err = conn.Flush()
		}
		if err != nil {
			return n, err
		}
		ws.wrote(&m, time.Time{})
		last = cmp.Or(m.cursor, last)
		if ws.stopping() {
			break
		}
	}
	if n == 0 {
		// What a burst of the waking goroutine left buffered (writeNow):
		// the socket had no room for it then.
		return 0, conn.Flush()
	}
	return n, nil
}

// frame hands a queued message to the connection (its events encoded into
// buf, taken from encodePool when nil) and releases its place in the
// queue's budget.
func (ws *wsSession) frame(m *wsMessage, buf []byte) ([]byte, error) {
	var err error
	if m.txn != nil {
		if buf == nil {
			buf = takeEncodeBuf()
		}
		buf, err = writeTxn(ws.conn, m.txn, ws.batch, buf)
	} else {
		err = ws.conn.Text(m.data)
	}
	ws.queued.Release(m.weight)
	return buf, err
}

// wrote records a message handed to the connection, at now (the clock
// read here when zero).
func (ws *wsSession) wrote(m *wsMessage, now time.Time) {
	if m.txn != nil && len(m.txn.Events) > 0 {
		if now.IsZero() {
			now = time.Now()
		}
		metrics.WSWritten(m.txn.Received, now)
	}
}

// setWritten records the cursor of the last transaction handed to the
// connection (for the final message), once per burst rather than per
// message: each record is an allocation. A copy: a pointer into the
// queued message would keep its transaction alive.
func (ws *wsSession) setWritten(cursor string) {
	if cursor != "" {
		ws.written.Store(&cursor)
	}
}

// wsNowMax bounds the messages the waking goroutine writes itself
// (writeNow): a larger one goes to the writer goroutine, which may block.
const wsNowMax = 16 << 10

// writeNow is the writer's burst run by the goroutine that woke a parked
// subscription (the tail's, wakeOnTail): small queued messages are
// buffered and sent as far as the socket takes them without waiting. It
// reports false when a writer goroutine must go on: a message too large
// for this path, bytes the socket did not take, or a failed write (which
// the writer meets again and ends the session on).
func (ws *wsSession) writeNow() bool {
	queue, conn := ws.queue, ws.conn
	if !conn.CanWriteNow() {
		return false
	}
	var buf []byte
	defer func() { putEncodeBuf(buf) }()
	// One clock read for the burst: it is sent within microseconds, or
	// left to the writer goroutine.
	now := time.Now()
	conn.SetHold(true)
	n := 0
	var last string // the cursor of the last transaction handed over
	defer func() { ws.setWritten(last) }()
	for n < wsBurst && conn.Buffered() < wsconn.FlushAt {
		m, ok := queue.popUpTo(wsNowMax)
		if !ok {
			break
		}
		n++
		var err error
		if buf, err = ws.frame(&m, buf); err != nil {
			// The library sent its close frame: the writer ends the session.
			conn.SetHold(false)
			return false
		}
		ws.wrote(&m, now)
		last = cmp.Or(m.cursor, last)
	}
	conn.SetHold(false)
	done, err := conn.TryFlush()
	return done && err == nil && queue.len() == 0
}

// finish ends the session, on the writer's goroutine: the producer, if one
// runs, returns first (the subscription is not safe for concurrent use),
// then the subscription, the timers and the connection are closed.
func (ws *wsSession) finish() {
	ws.writer.done()
	ws.cancel()
	if ws.producing {
		ws.parked = <-ws.produced
		ws.producing = false
	}
	ws.parked.Stop()
	ws.parked = nil
	ws.stopBeat()
	ws.stopExpiry()
	ws.keepAlive.Stop()
	ws.stopWatch()
	ws.s.Close()
	if ws.acks != nil {
		ws.acks.wait() // a pending ack gets its last attempt before the session ends
	}
	ws.stopAfterShutdown()
	ws.done()
}

// end follows the session's cancel (ws.cancel is the only one of ws.ctx):
// once the connection is done for, a write blocked on a client that
// stopped reading gives up within WebSocketConfig.GiveUp (a final message
// on a healthy connection still fits in that time), and the writer comes
// to finish.
// A function of the cancel rather than context.AfterFunc, which costs
// every connection a context and a map of its own.
func (ws *wsSession) end() {
	if !ws.over.CompareAndSwap(false, true) {
		return
	}
	if ws.conn != nil {
		ws.conn.GiveUpAfter(ws.a.WebSocketConfig.GiveUp)
	}
	ws.writer.kick()
}

// keepAliveTurn pings the client every WebSocketConfig.KeepAlive
// (wsconn.Conn.Ping): a client that has not answered the last ping by the
// next one is gone, and the session ends (as the library's Ping timed out
// before). The ping is the writer's to send, between two frames.
func (ws *wsSession) keepAliveTurn() error {
	if err := ws.conn.Ping(); err != nil {
		return err
	}
	ws.keepAlive.Reset(ws.a.WebSocketConfig.KeepAlive)
	return nil
}
