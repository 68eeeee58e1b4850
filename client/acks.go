package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// acker sends a named subscriber's acks in the background. An ack moves
// the subscriber's stored cursor forward only, so only the newest one
// matters: a newer ack replaces one not sent yet, and at most one goes
// out per interval (each is a store write on the gateway). While a
// WebSocket is open an ack is a message on it, otherwise an HTTP POST.
type acker struct {
	c *Client

	mu   sync.Mutex
	want string // the newest cursor offered
	sent string // the newest cursor sent (over either way)
	// posted is the newest cursor an HTTP POST stored: a WebSocket ack
	// is stored by the gateway in the background and lost if the gateway
	// dies first, so Close posts what only went over a WebSocket.
	posted string
	ws     func(ctx context.Context, cursor string) error // while a WebSocket is open
	wake   chan struct{}
}

// ackRetry is the wait before a failed ack is sent again (a newer one
// goes out with the next interval anyway).
const ackRetry = time.Second

func newAcker(c *Client) *acker { return &acker{c: c, wake: make(chan struct{}, 1)} }

// offer queues cursor as the newest ack.
func (k *acker) offer(cursor string) {
	if cursor == "" || inside(cursor) {
		return
	}
	k.mu.Lock()
	k.want = cursor
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// setWS routes acks over an open WebSocket (nil: over HTTP again). A
// cursor not sent yet goes out on the new connection.
func (k *acker) setWS(send func(ctx context.Context, cursor string) error) {
	k.mu.Lock()
	k.ws = send
	k.mu.Unlock()
	if send != nil {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// run sends acks until ctx ends.
func (k *acker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
		}
		if err := k.send(ctx); err != nil && ctx.Err() == nil {
			k.c.log.Warn("ack failed; the next one carries the cursor on", "err", err)
			if wait.Sleep(ctx, ackRetry) != nil {
				return
			}
			k.offer(k.pending())
			continue
		}
		if wait.Sleep(ctx, k.c.o.ackInterval) != nil {
			return
		}
	}
}

func (k *acker) pending() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.want == k.sent {
		return ""
	}
	return k.want
}

// send sends the newest cursor if it was not sent yet.
func (k *acker) send(ctx context.Context) error {
	k.mu.Lock()
	cursor, ws := k.want, k.ws
	if cursor == k.sent {
		k.mu.Unlock()
		return nil
	}
	k.mu.Unlock()
	var err error
	if ws != nil {
		err = ws(ctx, cursor)
	} else {
		err = k.c.postAck(ctx, cursor)
	}
	var refused *Error
	if errors.As(err, &refused) && !refused.retryable() {
		// Sending it again gets the same answer; the next commit's ack
		// may be taken.
		k.c.log.Error("the gateway refused an ack", "err", err)
		err = nil
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.sent = cursor
	if ws == nil {
		k.posted = cursor
	}
	k.mu.Unlock()
	return nil
}

// flush posts the newest cursor over HTTP unless a POST stored it already:
// the last ack of a Client that closes.
func (k *acker) flush(ctx context.Context) error {
	k.mu.Lock()
	cursor := k.want
	done := cursor == "" || cursor == k.posted
	k.mu.Unlock()
	if done {
		return nil
	}
	if err := k.c.postAck(ctx, cursor); err != nil {
		return err
	}
	k.mu.Lock()
	k.sent, k.posted = cursor, cursor
	k.mu.Unlock()
	return nil
}

// postAck stores cursor as the subscriber's (POST …/ack). A refused token
// is asked for again once.
func (c *Client) postAck(ctx context.Context, cursor string) error {
	body, _ := json.Marshal(map[string]string{"cursor": cursor})
	u := c.endpoint("subscribers/"+url.PathEscape(c.o.subscriber)+"/ack", nil)
	for attempt := 0; ; attempt++ {
		tok, err := c.tokens.get(ctx, attempt > 0)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		c.authorize(req.Header, tok)
		resp, err := c.o.http.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			return nil
		}
		e := readError(resp)
		resp.Body.Close()
		if e.Status != http.StatusUnauthorized || attempt > 0 || c.tokens.src == nil {
			return e
		}
	}
}
