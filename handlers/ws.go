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
	cw := &corkWriter{ResponseWriter: w}
	c, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		Subprotocols:       []string{"vsg.v1"},
		InsecureSkipVerify: true, // origins are checked by the CORS/auth middleware
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		s.Close()
		return // Accept wrote the HTTP error
	}
	defer c.CloseNow()
	c.SetReadLimit(a.Limits.WSReadLimit)

	ctx, cancel := context.WithCancel(ctx)
	// The subscription is not safe for concurrent use: it is closed only
	// once the producer, which reads it, has returned.
	produced := make(chan struct{})
	defer func() { cancel(); <-produced; s.Close() }()

	queue := make(chan wsMessage, a.Limits.WSQueue)
	var written atomic.Pointer[string] // cursor of the last whole transaction written
	if tok, _ := s.Cursor(ctx); tok != "" {
		written.Store(&tok)
	}
	closeWith := make(chan closeReq, 1)

	// Reader: acks and client close.
	go func() {
		defer cancel()
		for {
			_, msg, err := c.Read(ctx)
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
		err := pump(ctx, s, a.scoped(ctx, def.Name, "ws", &wsSink{queue: queue, slowAfter: a.Limits.WSSlowAfter, batch: r.URL.Query().Get("batch") == "txn"}), a.Limits.CursorHeartbt)
		switch {
		case errors.Is(err, errSlowConsumer):
			trySend(closeWith, closeReq{CloseSlowConsumer, "slow_consumer", "send queue overflowed; resume from cursor"})
		case err != nil && ctx.Err() == nil:
			a.Log.Warn("websocket stream ended", "stream", def.Name, "err", err)
			trySend(closeWith, closeReq{CloseUpstream, "upstream_failed", err.Error()})
		}
	}()

	// Writer: this goroutine owns all writes.
	var buf []byte // reused for every event: encoded here, written, forgotten
	keepAlive := time.NewTicker(a.Limits.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case m := <-queue:
			more := len(queue) > 0 || (m.txn != nil && len(m.txn.Events) > 1)
			if more {
				cw.conn.cork()
			}
			if m.txn != nil {
				for i := range m.txn.Events {
					buf = m.txn.Events[i].AppendJSON(buf[:0], m.txn.Cursor)
					if i == len(m.txn.Events)-1 {
						// The last event of a transaction says so: only a
						// cursor seen with txn_end is safe to ack.
						buf = append(buf[:len(buf)-1], `,"txn_end":true}`...)
					}
					if err := c.Write(ctx, websocket.MessageText, buf); err != nil {
						return
					}
				}
			} else if err := c.Write(ctx, websocket.MessageText, m.data); err != nil {
				return
			}
			if !more || len(queue) == 0 {
				if err := cw.conn.uncork(); err != nil {
					return
				}
			}
			if m.cursor != "" {
				written.Store(&m.cursor)
			}
		case req := <-closeWith:
			cw.conn.uncork()
			a.finalClose(c, req, written.Load())
			return
		case <-a.Shutdown:
			cw.conn.uncork()
			a.finalClose(c, closeReq{CloseShutdown, "shutdown", "the gateway is shutting down; reconnect and resume from cursor"}, written.Load())
			return
		case <-keepAlive.C:
			cw.conn.uncork()
			pctx, pcancel := context.WithTimeout(ctx, a.Limits.KeepAlive)
			err := c.Ping(pctx)
			pcancel()
			if err != nil {
				return
			}
		case <-ctx.Done():
			cw.conn.uncork()
			select {
			case req := <-closeWith:
				a.finalClose(c, req, written.Load())
			default:
			}
			return
		}
	}
}

type closeReq struct {
	code    websocket.StatusCode
	reason  string
	message string
}

func trySend(ch chan closeReq, r closeReq) {
	select {
	case ch <- r:
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.Write(ctx, websocket.MessageText, b)
	c.Close(req.code, req.reason)
}

var errSlowConsumer = errors.New("slow consumer")

type wsSink struct {
	queue chan wsMessage
	// slowAfter is how long a full queue may stay full before the client
	// counts as slow: a replaying client that reads steadily is throttled
	// (the VStream waits), only one that stops reading is cut off.
	slowAfter time.Duration
	// batch sends each transaction as one message, a JSON array of its
	// events (?batch=txn): far fewer frames for bulk consumers.
	batch bool
	timer *time.Timer
}

func (s *wsSink) push(m wsMessage) error {
	select {
	case s.queue <- m:
		return nil
	default:
	}
	if s.timer == nil {
		s.timer = time.NewTimer(s.slowAfter)
	} else {
		s.timer.Reset(s.slowAfter)
	}
	select {
	case s.queue <- m:
		s.timer.Stop()
		return nil
	case <-s.timer.C:
		return errSlowConsumer
	}
}

func (s *wsSink) deliver(d *hub.Delivery, _ bool) error {
	if s.batch {
		b := []byte{'['}
		for i := range d.Events {
			if i > 0 {
				b = append(b, ',')
			}
			b = d.Events[i].AppendJSON(b, d.Cursor)
		}
		b = append(b[:len(b)-1], `,"txn_end":true}]`...)
		return s.push(wsMessage{data: b, cursor: d.Cursor})
	}
	return s.push(wsMessage{txn: d, cursor: d.Cursor})
}

func (s *wsSink) heartbeat(cursor string) error {
	return s.push(wsMessage{
		data:   []byte(`{"type":"heartbeat","cursor":"` + cursor + `"}`),
		cursor: cursor,
	})
}
