package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/budget"
	"github.com/vstream-gateway/vstream-gateway/internal/wsconn"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// WS serves GET /v1/streams/{stream}/ws: one JSON message per event; the
// client acks with {"ack":"<cursor>"} (stored for named subscribers).
func (a *API) WS(w http.ResponseWriter, r *http.Request) {
	r, def, sub, start, ok := a.readerParams(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Upgrade", "websocket")
		WriteError(w, a.Log, apiErr(http.StatusUpgradeRequired, "upgrade_required", "this endpoint speaks WebSocket"))
		return
	}
	leave := a.present(def.Name, sub)
	s, err := a.open(ctx, def, r.URL.Query().Get("cursor"), sub, start)
	if err != nil {
		leave()
		WriteError(w, a.Log, err)
		return
	}
	c, conn, err := wsconn.Accept(w, r, a.WebSocketConfig.Config, websocket.AcceptOptions{
		Subprotocols: []string{"vsg.v1"},
		// Origins are checked by the CORS/auth middleware.
		InsecureSkipVerify: true,
	})
	if err != nil {
		s.Close()
		leave()
		return // Accept wrote the HTTP error
	}
	ws := a.newWSSession(r, def, sub, s, c, conn)
	// The session goes on in goroutines of its own and the handler
	// returns: net/http then drops the request and response it holds for
	// the handler, and the goroutine's stack, grown deep under the
	// middleware, is freed (DESIGN §6.1). The connection still counts as
	// open (extend) until the session ends.
	release := extend(r)
	ws.start(func() {
		c.CloseNow()
		leave()
		release()
	})
}

// recoverPanic logs a panic of the session's writer and lets the session
// end: one broken connection never takes the process down (the router's
// recoverer no longer runs under the session).
func (ws *wsSession) recoverPanic() {
	if v := recover(); v != nil {
		ws.recoverPanicValue(v)
	}
}

func (ws *wsSession) recoverPanicValue(v any) {
	ws.a.Log.Error("panic serving a websocket", "stream", ws.def.Name, "panic", v, "stack", string(debug.Stack()))
}

// wsSession is one WebSocket client. Goroutines share it, each with one
// job, so that none waits on what another is waiting for: readLoop takes
// the client's acks, the writer (wswriter.go) writes the send queue to the
// client, and while the subscription cannot be waited on otherwise,
// produce moves it into the send queue. An idle client on its stream's
// tail has neither producer nor writer: its subscription is parked on the
// tail, and the tail's next append starts the writer, which reads what
// came itself (wspark.go, DESIGN §6.1).
type wsSession struct {
	a *API
	// base carries the request's principal (the token's table scope), and
	// no cancellation: the request's context ends when the handler
	// returns, long before the session.
	base  context.Context
	def   *streams.Definition
	sub   string // named subscriber, or "" for an anonymous client
	s     *hub.Subscription
	c     *websocket.Conn
	conn  *wsconn.Conn
	batch bool // batch=txn: arrays of a transaction's events (writeTxn)

	// ctx ends when the session is done for: client gone, slow consumer,
	// upstream failure, bad message.
	ctx    context.Context
	cancel context.CancelFunc

	queue  *wsQueue
	queued *budget.Bytes
	// written is the cursor of the last whole transaction written: what
	// the final disconnect message tells the client to resume from.
	written atomic.Pointer[string]
	// closing carries the reason to close; the first one wins.
	closing chan Disconnect
	// acks stores a named subscriber's acks (nil for anonymous clients).
	acks *acker

	// sink is the producer's end of the queue, out the same behind the
	// token's table scope (o).
	sink *wsSink
	o    *outbound
	out  sink
	// The subscription is read by one goroutine at a time: the producer
	// while producing is set (the writer's to change), else the writer.
	// produced carries the producer's exit: the subscription's
	// registration with the tail when it parked, nil when the session is
	// over.
	producing bool
	produced  chan *hub.Parked

	// The writer runs only while it has work (wswriter.go). Of what gives
	// it work, the flags are set by the parked subscription's wake-up
	// (woken) and the heartbeat timer (beatDue).
	writer  writerState
	woken   atomic.Bool
	beatDue atomic.Bool
	pingDue atomic.Bool
	// parked is the subscription's registration with the tail while the
	// writer holds it parked; beat is the timer of its next cursor
	// heartbeat, and idleFrom when the client was last sent something: a
	// heartbeat is due an interval later.
	parked   *hub.Parked
	beat     *time.Timer
	idleFrom time.Time
	// wake and kick are the functions given to the tail and the timers
	// (made once, not at every parking).
	wake, kick func()
	keepAlive  *time.Timer
	// The stops of what start registered, and what ends the connection.
	stopWatch, stopAfterShutdown func() bool
	done                         func()
	// over is set by the first cancel (end).
	over atomic.Bool
	// principal is the token the connection reads with now, and expiry
	// closes the session at its exp (wsrefresh.go).
	principal *auth.Principal
	expiry    *time.Timer
}

func (a *API) newWSSession(r *http.Request, def *streams.Definition, sub string, s *hub.Subscription, c *websocket.Conn, conn *wsconn.Conn) *wsSession {
	base := context.Background()
	if p := auth.FromContext(r.Context()); p != nil {
		base = auth.NewContext(base, p)
	}
	base = withFormat(base, formatOf(r.Context()))
	ws := &wsSession{a: a, base: base, def: def, sub: sub, s: s, c: c, conn: conn,
		batch:   r.URL.Query().Get("batch") == "txn",
		queue:   newWSQueue(a.WebSocketConfig.Queue),
		queued:  budget.New(a.WebSocketConfig.QueueBytes),
		closing: make(chan Disconnect, 1),
	}
	ctx, cancel := context.WithCancel(base)
	ws.ctx, ws.cancel = ctx, func() {
		cancel()
		ws.end()
	}
	ws.sink = &wsSink{ctx: ws.ctx, queue: ws.queue, bytes: ws.queued, slowAfter: a.WebSocketConfig.SlowAfter}
	ws.o = outboundFor(base, def.Name, "ws")
	ws.out = scopedSink{sink: ws.sink, o: ws.o}
	ws.produced = make(chan *hub.Parked, 1)
	if sub != "" {
		ws.acks = a.newAcker(ws.ctx, base, def, sub, "ws", ws.ackRefused)
	}
	// A client that gave a cursor resumes from it if nothing was written.
	if tok, _ := s.Cursor(ws.ctx); tok != "" {
		ws.written.Store(&tok)
	}
	return ws
}

// start sets the session going and returns; done closes the connection
// once the session is over. What runs from then on is the reading
// goroutine, and the writer and the producer only while they have
// something to do (DESIGN §6.1).
func (ws *wsSession) start(done func()) {
	ws.done = done
	// The producer has the subscription first (startProducer), marked
	// before anything that may run the writer, which reads the mark: a
	// timer, the shutdown, or the reader ending the session at its
	// client's first message (a refused refresh) before start returns.
	ws.producing = true
	ws.writer.start = func() { go ws.write() }
	ws.kick = ws.writer.kick
	ws.wake = ws.wakeOnTail
	ws.queue.pushed = ws.kick
	ws.stopWatch = ws.watchWrites()
	ws.keepAlive = time.AfterFunc(ws.a.WebSocketConfig.KeepAlive, func() {
		ws.pingDue.Store(true)
		ws.writer.kickHere(ws.write)
	})
	ws.armExpiry()
	// On a gateway already shutting down the function runs at once, and
	// the writer it starts may finish the session, which stops the timers
	// above and this function itself: it waits until they are all set.
	set := make(chan struct{})
	ws.stopAfterShutdown = context.AfterFunc(ws.a.shutdown(), func() { <-set; ws.writer.kickHere(ws.write) })
	close(set)
	go ws.readLoop()
	go ws.produce(nil)
}

// watchWrites makes a data write that blocks for --ws-slow-after end the
// session as a slow consumer, as a queue full for that long does. While
// the producer runs, a client that stops reading fills the queue; while
// the subscription is parked nothing does, and the writer would wait on
// the socket for good. The write itself goes on: once the session is
// cancelled it has WebSocketConfig.GiveUp more to finish, and the final message follows
// on a healthy connection. It returns the watchdog's stop.
func (ws *wsSession) watchWrites() (stop func() bool) {
	if ws.a.WebSocketConfig.SlowAfter <= 0 {
		return func() bool { return false }
	}
	return ws.conn.WatchWrites(ws.a.WebSocketConfig.SlowAfter, func() {
		ws.closeWith(DisconnectSlow)
		ws.cancel()
	})
}

// readLoop reads the client's messages: acks, stored for a named
// subscriber, token refreshes (wsrefresh.go), and the close handshake, which the library answers. It
// reads under a context that never ends, not ws.ctx: the library closes
// the connection when a read's context ends, and ending ws.ctx (slow
// consumer, upstream failure) must leave the writer the connection for its
// final message. The session's CloseNow ends it.
func (ws *wsSession) readLoop() {
	defer ws.cancel()
	for {
		if ws.conn.AwaitReadable() {
			return // the writer is closing the connection
		}
		_, msg, err := ws.c.Read(ws.base)
		if err != nil {
			return
		}
		var m struct {
			Ack     string `json:"ack"`
			Refresh string `json:"refresh"`
		}
		if json.Unmarshal(msg, &m) != nil || (m.Ack == "") == (m.Refresh == "") {
			ws.closeWith(DisconnectBadMessage)
			return
		}
		if m.Refresh != "" {
			if !ws.refresh(m.Refresh) {
				return
			}
			continue
		}
		if ws.sub == "" {
			continue // anonymous clients keep their own cursor
		}
		ws.acks.offer(m.Ack)
	}
}

// ackRefused ends the session for an ack the gateway refused (a bad
// cursor) or could not store for another reason than a store outage.
func (ws *wsSession) ackRefused(err error) {
	var e *Error
	if errors.As(err, &e) {
		ws.closeWith(Disconnect{Code: DisconnectBadMessage.Code, Reason: e.Code, Message: e.Message})
	} else {
		ws.a.Log.Error("storing a websocket ack failed", "stream", ws.def.Name, "subscriber", ws.sub, "err", err)
	}
	ws.cancel()
}

// produce moves the subscription into the send queue, pending first if
// given (a delivery the writer read but found no room for). It runs apart
// from the writer so that a client reading slowly shows as a full queue:
// the stream is throttled while the client keeps reading, and cut off as a
// slow consumer once the queue stays full (wsSink). Once it has nothing to
// read and the subscription can be parked on the tail, it hands the
// subscription back to the writer and ends.
func (ws *wsSession) produce(pending *hub.Delivery) {
	var parked *hub.Parked
	defer func() {
		ws.produced <- parked
		ws.writer.kickHere(ws.write)
	}()
	var err error
	if pending != nil {
		err = ws.sink.deliver(pending, false)
	}
	if err == nil {
		err = pumpFeed(ws.ctx, feed.Parking(ws.s, ws.wake), ws.s, ws.out, ws.a.WebSocketConfig.CursorHeartbeat)
	}
	var p *feed.ParkedError
	if errors.As(err, &p) {
		parked = p.Parked
		return
	}
	ws.ended(err)
}

// ended ends the session for the error that stopped reading the stream.
func (ws *wsSession) ended(err error) {
	switch {
	case errors.Is(err, errSlowConsumer):
		ws.closeWith(DisconnectSlow)
	case err != nil && ws.ctx.Err() == nil:
		ws.a.Log.Warn("websocket stream ended", "stream", ws.def.Name, "err", err)
		d := DisconnectUpstream.withMessage(err.Error())
		var e *Error
		if errors.As(streamError(err), &e) && e.Status == http.StatusConflict {
			// The stream cannot go on from here (tables_dropped,
			// resume_impossible, spool_gone): the reason is the code a poller gets
			// with its 409, so that a client tells it from an outage.
			d.Reason, d.Message = e.Code, e.Message
		}
		ws.closeWith(d)
	}
	ws.cancel()
}

// encodePool holds the writers' encoding buffers between bursts, so that
// an idle connection holds none.
var encodePool = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

func takeEncodeBuf() []byte { return (*encodePool.Get().(*[]byte))[:0] }

// putEncodeBuf returns buf to the pool, unless it is nil or grew past what
// writeTxn keeps (a huge transaction's buffer is left to the collector).
func putEncodeBuf(buf []byte) {
	if buf == nil || cap(buf) > 1<<20 {
		return
	}
	buf = buf[:0]
	encodePool.Put(&buf)
}

// wsBurst bounds the queued messages the writer sends per turn of its
// loop.
const wsBurst = 64

// stopping reports, without waiting, whether the writer has something
// more urgent than the next message: a reason to close, a shutdown, or the
// session's end.
func (ws *wsSession) stopping() bool {
	if len(ws.closing) > 0 {
		return true
	}
	select {
	case <-ws.ctx.Done():
		return true
	case <-ws.a.shutdown().Done():
		return true
	default:
		return false
	}
}

// batchMessageBytes is where a batch message ends: a transaction larger
// than this goes out as several arrays, each closed before the event that
// would pass it (the last event of the transaction still the one with
// "txn_end"). Readers turn a message into one string before they parse
// it, and JavaScript engines keep strings past 128 KiB in a large-object
// space that is far slower to allocate: in Node 20, a 313 KB message of
// 1,000 rows took 1.3 ms to become a string, the same bytes in 64 KiB
// pieces 0.04 ms. Smaller messages also let a reader parse the start of
// a big transaction while the rest is still on the wire.
const batchMessageBytes = 64 << 10

// writeTxn frames a transaction: one message per event, the last one
// marked "txn_end" (only a cursor seen with txn_end is safe to ack; a
// piece of a chunked transaction has neither until its last), or with
// batch JSON arrays of its events (batchTxn). A transaction the token's
// table scope emptied sends nothing. buf is scratch space, returned for
// reuse.
func writeTxn(conn *wsconn.Conn, d *hub.Delivery, batch bool, buf []byte) ([]byte, error) {
	if cap(buf) > 1<<20 {
		buf = nil // after a huge transaction, do not keep its buffer
	}
	last := len(d.Events) - 1
	if last < 0 {
		return buf, nil
	}
	if batch {
		return batchTxn(conn, d, buf)
	}
	for i := range d.Events[:last] {
		buf = d.Events[i].AppendJSON(buf[:0], d.Cursor)
		if err := conn.Text(buf); err != nil {
			return buf, err
		}
	}
	buf = appendLast(buf[:0], d)
	return buf, conn.Text(buf)
}

// batchTxn sends a transaction as JSON arrays of its events, one message
// unless it passes batchMessageBytes. The cursor, the same for every event
// of a transaction, is written once per message, on its last event:
// repeated on each it was a third of a typical row's bytes, for readers
// to parse and throw away.
func batchTxn(conn *wsconn.Conn, d *hub.Delivery, buf []byte) ([]byte, error) {
	last := len(d.Events) - 1
	buf = append(buf[:0], '[')
	for i := range d.Events[:last] {
		e := &d.Events[i]
		// The next event must fit as well, if only the last one does.
		if next := &d.Events[i+1]; len(buf)+e.Size()+next.Size() < batchMessageBytes {
			buf = append(e.AppendJSON(buf, ""), ',')
			continue
		}
		buf = append(e.AppendJSON(buf, d.Cursor), ']')
		if err := conn.Text(buf); err != nil {
			return buf, err
		}
		buf = append(buf[:0], '[')
	}
	buf = append(appendLast(buf, d), ']')
	return buf, conn.Text(buf)
}

// appendLast appends a delivery's last event: with "txn_end" when it ends
// a transaction, without when more of a chunked one follows (DESIGN §3.1).
func appendLast(buf []byte, d *hub.Delivery) []byte {
	e := &d.Events[len(d.Events)-1]
	if d.Partial {
		return e.AppendJSON(buf, d.Cursor)
	}
	return e.AppendWithTxnEnd(buf, d.Cursor)
}
