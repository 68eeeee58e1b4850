package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Centrifugo's client protocol (JSON over WebSocket): commands carry an id
// and get a reply with it; pushes have no id; several replies and pushes
// may share one frame, separated by newlines; the server's ping is an
// empty object, answered with an empty object.

var (
	keyPush   = []byte(`{"push":`)
	keyOffset = []byte(`"offset":`)
	emptyObj  = []byte(`{}`)
)

// centrifugoToken mints the HS256 connection JWT Centrifugo verifies with
// its client.token.hmac_secret_key.
func centrifugoToken(secret, sub string, ttl time.Duration) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub,
		"exp": time.Now().Add(ttl).Unix(),
	}).SignedString([]byte(secret))
}

// subscribeReply is the part of a subscribe reply the reader uses.
type subscribeReply struct {
	ID    int `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Subscribe *struct {
		Epoch         string `json:"epoch"`
		Offset        uint64 `json:"offset"`
		Recovered     bool   `json:"recovered"`
		WasRecovering bool   `json:"was_recovering"`
		Publications  []struct {
			Data   json.RawMessage `json:"data"`
			Offset uint64          `json:"offset"`
		} `json:"publications"`
	} `json:"subscribe"`
}

// cfSession connects to Centrifugo, subscribes to the channel and reads
// publications. After the first connection it asks for recovery from the
// last offset it saw: Centrifugo then sends, inside the subscribe reply,
// the publications it missed, as long as the channel's history still holds
// them (history_size, history_ttl); otherwise recovered is false and the
// gap is lost.
func cfSession(ctx context.Context, r *reader, connected *bool) error {
	c, err := dialWS(ctx, r.env.addr, "/connection/websocket", nil)
	if err != nil {
		return err
	}
	defer context.AfterFunc(ctx, c.close)()
	r.setStop(c.close)
	defer c.close()

	sub := map[string]any{"channel": r.env.stream}
	if r.cfEpoch != "" {
		sub["recover"], sub["offset"], sub["epoch"] = true, r.cfOffset, r.cfEpoch
	}
	connect, _ := json.Marshal(map[string]any{"id": 1, "connect": map[string]any{"token": r.env.token, "name": "vsg-load"}})
	subscribe, _ := json.Marshal(map[string]any{"id": 2, "subscribe": sub})
	if err := c.writeText(append(append(connect, '\n'), subscribe...)); err != nil {
		return err
	}
	return c.each(func(frame []byte, now int64) error {
		r.arrived = c.arrived
		for len(frame) > 0 {
			line := frame
			if i := bytes.IndexByte(frame, '\n'); i >= 0 {
				line, frame = frame[:i], frame[i+1:]
			} else {
				frame = nil
			}
			if err := r.cfLine(c, line, now, connected); err != nil {
				return err
			}
		}
		return nil
	})
}

// cfLine handles one reply or push.
func (r *reader) cfLine(c *wsConn, line []byte, now int64, connected *bool) error {
	switch {
	case len(line) == 0:
		return nil
	case bytes.Equal(line, emptyObj):
		return c.writeText(emptyObj) // pong
	case bytes.HasPrefix(line, keyPush):
		if !bytes.Contains(line, []byte(`"pub":`)) {
			// A disconnect, unsubscribe or other push: the connection
			// is as good as gone.
			return fmt.Errorf("centrifugo push: %s", line)
		}
		r.msgs.Add(1)
		if n := scanRows(line, r.env.marker, func(seq, ts int64) { r.row(seq, ts, now) }); n > 0 {
			r.malformed.Add(int64(n))
		}
		if i := bytes.LastIndex(line, keyOffset); i >= 0 {
			if off, _, ok := digitsUntil(line[i+len(keyOffset):], '}'); ok {
				r.cfOffset = uint64(off)
			}
		}
		return nil
	}
	var rep subscribeReply
	if err := json.Unmarshal(line, &rep); err != nil {
		return fmt.Errorf("centrifugo reply %q: %w", line, err)
	}
	if rep.Error != nil {
		return fmt.Errorf("centrifugo error %d: %s", rep.Error.Code, rep.Error.Message)
	}
	if rep.ID != 2 || rep.Subscribe == nil {
		return nil // the connect reply
	}
	*connected = true
	s := rep.Subscribe
	if s.WasRecovering && !s.Recovered {
		r.recoveryFailed.Add(1)
	}
	for _, p := range s.Publications {
		r.msgs.Add(1)
		scanRows(p.Data, r.env.marker, func(seq, ts int64) { r.row(seq, ts, now) })
	}
	r.cfEpoch, r.cfOffset = s.Epoch, s.Offset
	r.markReady(now)
	return nil
}
