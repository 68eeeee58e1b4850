package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/budget"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// WebSocket close codes (application range 4000-4999). Before closing with
// one of them the server sends a final {"type":"disconnect",…} message with
// the cursor to resume from, because a close reason is limited to 123 bytes
// and a cursor may not fit.
const (
	// CloseSlowConsumer: the client read too slowly and its send queue
	// overflowed. Resume from the disconnect message's cursor.
	CloseSlowConsumer websocket.StatusCode = 4008
	// CloseUpstream: the stream failed upstream (vtgate); retry later.
	CloseUpstream websocket.StatusCode = 4011
	// CloseBadMessage: the client sent something that is not an ack.
	CloseBadMessage websocket.StatusCode = 4000
	// CloseShutdown: the gateway is shutting down; reconnect elsewhere.
	CloseShutdown websocket.StatusCode = 4001
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

// WS serves GET /v1/streams/{stream}/ws: one JSON message per event; the
// client acks with {"ack":"<cursor>"} (stored for named subscribers).
func (a *API) WS(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	def, sub, ok := a.readerParams(w, r)
	if !ok {
		return
	}
	var err error
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Upgrade", "websocket")
		WriteError(w, a.Log, apiErr(http.StatusUpgradeRequired, "upgrade_required", "this endpoint speaks WebSocket"))
		return
	}
	s, err := a.open(ctx, def, r.URL.Query().Get("cursor"), sub)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	hj := &wsHijacker{ResponseWriter: w}
	c, err := websocket.Accept(hj, r, &websocket.AcceptOptions{
		Subprotocols: []string{"vsg.v1"},
		// Origins are checked by the CORS/auth middleware.
		InsecureSkipVerify: true,
		// Data frames are written as they are (wsConn).
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		s.Close()
		return // Accept wrote the HTTP error
	}
	defer c.CloseNow()
	c.SetReadLimit(a.Limits.WSReadLimit)

	conn := hj.conn
	ctx, cancel := context.WithCancel(ctx)
	// Once the connection is done for (client gone, slow consumer, upstream
	// failure, shutdown), a write blocked on a client that stopped reading
	// gives up within wsGiveUp; a final message on a healthy connection
	// still fits in that time.
	defer context.AfterFunc(ctx, func() { conn.giveUpAfter(wsGiveUp) })()
	// The subscription is not safe for concurrent use: it is closed only
	// once the producer, which reads it, has returned.
	produced := make(chan struct{})
	defer func() { cancel(); <-produced; s.Close() }()

	queue := make(chan wsMessage, a.Limits.WSQueue)
	queued := budget.New(a.Limits.WSQueueBytes)
	var written atomic.Pointer[string] // cursor of the last whole transaction written
	if tok, _ := s.Cursor(ctx); tok != "" {
		written.Store(&tok)
	}
	closeWith := make(chan closeReq, 1)

	// Reader: acks and client close. It reads under the request's context,
	// not ctx: the library closes the connection when a read's context
	// ends, and ending ctx (slow consumer, upstream failure) must leave the
	// writer the connection for its final message. The deferred CloseNow
	// ends this goroutine.
	go func() {
		defer cancel()
		for {
			_, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			var m struct {
				Ack string `json:"ack"`
			}
			if json.Unmarshal(msg, &m) != nil || m.Ack == "" {
				trySend(closeWith, closeReq{CloseBadMessage, "bad_message", `expected {"ack":"<cursor>"}`})
				return
			}
			if sub == "" {
				continue // anonymous clients keep their own cursor
			}
			if _, err := a.ack(r, def, sub, m.Ack); err != nil {
				var e *Error
				if errors.As(err, &e) {
					trySend(closeWith, closeReq{CloseBadMessage, e.Code, e.Message})
				}
				return
			}
		}
	}()

	// Producer: subscription -> queue. Overflow means a slow consumer.
	go func() {
		defer close(produced)
		defer cancel()
		err := pump(ctx, s, a.scoped(ctx, def.Name, "ws", &wsSink{ctx: ctx, queue: queue, bytes: queued, slowAfter: a.Limits.WSSlowAfter}), a.Limits.CursorHeartbeat)
		switch {
		case errors.Is(err, errSlowConsumer):
			trySend(closeWith, closeReq{CloseSlowConsumer, "slow_consumer", "send queue overflowed; resume from cursor"})
		case err != nil && ctx.Err() == nil:
			a.Log.Warn("websocket stream ended", "stream", def.Name, "err", err)
			trySend(closeWith, closeReq{CloseUpstream, "upstream_failed", err.Error()})
		}
	}()

	// Writer: this goroutine owns all data frames.
	batch := r.URL.Query().Get("batch") == "txn"
	var buf []byte // reused for every message: encoded here, framed, forgotten
	keepAlive := time.NewTicker(a.Limits.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case m := <-queue:
			if m.txn != nil {
				buf, err = writeTxn(conn, m.txn, batch, buf)
			} else {
				err = conn.text(m.data)
			}
			queued.Release(m.weight)
			// A burst goes out together, a lone event at once.
			if err == nil && len(queue) == 0 {
				err = conn.flush()
			}
			if err != nil {
				return
			}
			if m.cursor != "" {
				written.Store(&m.cursor)
			}
		case req := <-closeWith:
			a.finalClose(c, req, written.Load())
			return
		case <-a.Shutdown:
			metrics.WSDisconnect(closeLabel(CloseShutdown))
			a.finalClose(c, closeReq{CloseShutdown, "shutdown", "the gateway is shutting down; reconnect and resume from cursor"}, written.Load())
			return
		case <-keepAlive.C:
			pctx, pcancel := context.WithTimeout(ctx, a.Limits.KeepAlive)
			err := c.Ping(pctx)
			pcancel()
			if err != nil {
				return
			}
		case <-ctx.Done():
			select {
			case req := <-closeWith:
				a.finalClose(c, req, written.Load())
			default:
			}
			return
		}
	}
}

// wsGiveUp is how long writes may still take once a WebSocket is done for.
const wsGiveUp = 2 * time.Second

// writeTxn frames a transaction: one message per event, the last one
// marked "txn_end" (only a cursor seen with txn_end is safe to ack), or
// with batch one message holding the JSON array of its events. buf is
// scratch space, returned for reuse.
func writeTxn(conn *wsConn, d *hub.Delivery, batch bool, buf []byte) ([]byte, error) {
	if cap(buf) > 1<<20 {
		buf = nil // after a huge transaction, do not keep its buffer
	}
	if batch {
		buf = append(buf[:0], '[')
		for i := range d.Events {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = d.Events[i].AppendJSON(buf, d.Cursor)
		}
		buf = append(buf[:len(buf)-1], `,"txn_end":true}]`...)
		return buf, conn.text(buf)
	}
	for i := range d.Events {
		buf = d.Events[i].AppendJSON(buf[:0], d.Cursor)
		if i == len(d.Events)-1 {
			buf = append(buf[:len(buf)-1], `,"txn_end":true}`...)
		}
		if err := conn.text(buf); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

type closeReq struct {
	code    websocket.StatusCode
	reason  string
	message string
}

// trySend asks the writer to close with r (the first request wins) and
// counts the disconnect.
func trySend(ch chan closeReq, r closeReq) {
	select {
	case ch <- r:
		metrics.WSDisconnect(closeLabel(r.code))
	default:
	}
}

// finalClose sends the disconnect message with the cursor of the last whole
// transaction written, then the close frame.
func (a *API) finalClose(c *websocket.Conn, req closeReq, cursor *string) {
	msg := map[string]any{"type": "disconnect", "code": int(req.code), "reason": req.reason, "message": req.message}
	if cursor != nil {
		msg["cursor"] = *cursor
	}
	b, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), wsGiveUp)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b)
	c.Close(req.code, req.reason)
}

// closeLabel is the metrics label of a close code.
func closeLabel(code websocket.StatusCode) string {
	switch code {
	case CloseSlowConsumer:
		return "slow_consumer"
	case CloseUpstream:
		return "upstream_failed"
	case CloseShutdown:
		return "shutdown"
	default:
		return "bad_message"
	}
}

var errSlowConsumer = errors.New("slow consumer")

type wsSink struct {
	ctx   context.Context
	queue chan wsMessage
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
	if held {
		select {
		case s.queue <- m:
			return nil
		default:
		}
	}
	// The client is behind; it may stay behind for slowAfter.
	ctx, cancel := context.WithTimeout(s.ctx, s.slowAfter)
	defer cancel()
	if !held {
		if err := s.bytes.Acquire(ctx, m.weight); err != nil {
			return s.gaveUp()
		}
	}
	select {
	case s.queue <- m:
		return nil
	case <-ctx.Done():
		s.bytes.Release(m.weight)
		return s.gaveUp()
	}
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
	data := []byte(`{"type":"heartbeat","cursor":"` + cursor + `"}`)
	return s.push(wsMessage{data: data, cursor: cursor, weight: len(data)})
}
