package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

const (
	// wsHandshakeTimeout bounds a WebSocket handshake.
	wsHandshakeTimeout = 30 * time.Second
	// wsReadLimit bounds one message: with batch=txn an array of events
	// (up to about 64 KiB, or one event, which may be bigger).
	wsReadLimit = 256 << 20
	// wsAckTimeout bounds writing one ack or refresh message.
	wsAckTimeout = 10 * time.Second
)

// disconnect is the gateway's last message before it closes a WebSocket
// itself (openapi.yaml, Disconnect).
type disconnect struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Cursor  string `json:"cursor"`
}

// websocket reads one WebSocket connection (/ws, batch=txn: arrays of a
// transaction's events, the cursor on each array's last) until it ends,
// and says why it ended.
func (c *Client) websocket(ctx context.Context, tok string) error {
	q := c.startQuery()
	q.Set("batch", "txn")
	h := http.Header{}
	c.authorize(h, tok)
	dog, rctx, stopDog := newWatchdog(ctx, c.o.idleTimeout)
	defer stopDog()
	dctx, cancel := context.WithTimeout(ctx, wsHandshakeTimeout)
	conn, resp, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(c.endpoint("ws", q), "http"),
		&websocket.DialOptions{HTTPClient: c.o.http, HTTPHeader: h, Subprotocols: []string{"vsg.v1"},
			// The gateway's pings (every 15 s) count as life too.
			OnPingReceived: func(context.Context, []byte) bool { dog.touch(); return true }})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return readError(resp)
		}
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(wsReadLimit)
	c.opened()
	dog.touch()

	c.acks.setWS(func(ctx context.Context, cursor string) error {
		return wsSend(ctx, conn, map[string]string{"ack": cursor})
	})
	stopRefresh := c.refreshWS(rctx, conn)
	// Reads take a context that never ends, and the connection is closed
	// when rctx ends instead: coder/websocket arms and disarms a watcher
	// of a read's context per message, which would cost more than
	// decoding the message.
	unwatch := context.AfterFunc(rctx, func() { conn.CloseNow() })
	err = cause(rctx, c.readWS(rctx, conn, dog))
	unwatch()
	c.acks.setWS(nil)
	stopDog() // ends rctx, and so the refresher
	stopRefresh()
	return err
}

func wsSend(ctx context.Context, conn *websocket.Conn, msg map[string]string) error {
	b, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(ctx, wsAckTimeout)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, b)
}

// readWS reads messages until the connection ends (closed when ctx
// ends).
func (c *Client) readWS(ctx context.Context, conn *websocket.Conn, dog *watchdog) error {
	var (
		asm  assembler
		bye  *disconnect
		last int // the size of the last message
	)
	for {
		_, r, err := conn.Reader(context.Background())
		// A buffer per message, sized as the last one: the events decoded
		// from it refer to it.
		buf := bytes.NewBuffer(make([]byte, 0, last+bytes.MinRead))
		if err == nil {
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			return c.wsEnded(ctx, err, bye, &asm)
		}
		dog.touch()
		msg := buf.Bytes()
		last = len(msg)
		evs, err := c.dec.message(msg)
		if err != nil {
			return fmt.Errorf("a message that is not JSON: %w", err)
		}
		if start := skipSpace(msg, 0); start < len(msg) && msg[start] == '[' {
			for i := range evs {
				if err := c.wsEvent(ctx, &asm, &evs[i], dog); err != nil {
					return err
				}
			}
			continue
		}
		switch w := &evs[0]; w.Type {
		case "heartbeat":
			if !asm.pending() {
				err = c.moveTo(ctx, w.Cursor)
			}
		case "disconnect":
			bye = &disconnect{}
			err = json.Unmarshal(msg, bye)
		default:
			err = c.wsEvent(ctx, &asm, w, dog)
		}
		if err != nil {
			return err
		}
	}
}

// wsEvent adds an event to the transaction being read, and delivers the
// transaction at its txn_end.
func (c *Client) wsEvent(ctx context.Context, asm *assembler, w *wireEvent, dog *watchdog) error {
	t, err := asm.add(w, w.TxnEnd, w.Cursor)
	if err != nil || t == nil {
		return err
	}
	dog.pause()
	defer dog.touch()
	return c.deliver(ctx, t)
}

// wsEnded says why the connection ended, from the gateway's disconnect
// message (openapi.yaml, the /ws close codes) or the close itself. The
// disconnect cursor is that of the last whole transaction sent: a
// position to resume from, unless part of a transaction came after it.
func (c *Client) wsEnded(ctx context.Context, err error, bye *disconnect, asm *assembler) error {
	var ce websocket.CloseError
	if bye == nil && !errors.As(err, &ce) {
		return err // the connection broke
	}
	if bye == nil {
		bye = &disconnect{Code: int(ce.Code), Reason: ce.Reason}
	} else if bye.Cursor != "" && !asm.pending() {
		c.moveTo(ctx, bye.Cursor)
	}
	what := fmt.Errorf("closed %d %s: %s", bye.Code, bye.Reason, bye.Message)
	switch bye.Code {
	case 4000:
		// A message of the client's was refused: an ack of a cursor the
		// gateway does not take (Ack with a foreign cursor), which is not
		// sent again. A subscriber whose scope no longer fits is refused
		// again at the handshake, for good.
		c.log.Error("the gateway refused a message of the client's", "reason", bye.Reason, "message", bye.Message)
		return what
	case 4001:
		return fmt.Errorf("%w (%w)", errShutdown, what)
	case 4003, 4010:
		return fmt.Errorf("%w (%w)", errTokenExpired, what)
	case 4008:
		return fmt.Errorf("%w (%w)", errSlow, what)
	case 4011:
		if cannotContinue[bye.Reason] || bye.Reason == "spool_gone" {
			return conflict(bye.Reason, bye.Message)
		}
		return &Error{Status: http.StatusBadGateway, Code: "upstream_failed", Message: bye.Message}
	}
	return what
}

// refreshWS sends the connection a fresh token before the one it was
// opened with expires (the gateway closes it at exp otherwise, 4010).
// The returned stop waits for the refresher to end.
func (c *Client) refreshWS(ctx context.Context, conn *websocket.Conn) func() {
	if exp, _ := c.tokens.expiry(); c.tokens.src == nil || exp.IsZero() {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		exp, ahead := c.tokens.expiry()
		for {
			if wait.Sleep(ctx, time.Until(exp)-ahead) != nil {
				return
			}
			tok, err := c.tokens.get(ctx, true)
			if err != nil {
				c.log.Warn("token refresh failed; the gateway closes the connection at the token's expiry", "err", err)
				return
			}
			var next time.Time
			next, ahead = c.tokens.expiry()
			if err := wsSend(ctx, conn, map[string]string{"refresh": tok}); err != nil || !next.After(exp) {
				return // a token that does not last longer: reconnect at exp
			}
			exp = next
		}
	}()
	return wg.Wait
}
