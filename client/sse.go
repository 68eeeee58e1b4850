package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// sseMessage is one event of a text/event-stream.
type sseMessage struct {
	event string
	data  []byte
	id    string
	hasID bool
}

// sse reads one Server-Sent Events response (/sse) until it ends, and
// says why it ended. The cursor goes in the query, not in Last-Event-ID:
// for a named subscriber the gateway takes a Last-Event-ID as an ack,
// and this client acks only what the application committed.
func (c *Client) sse(ctx context.Context, tok string) error {
	dog, rctx, stopDog := newWatchdog(ctx, c.o.idleTimeout)
	defer stopDog()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.endpoint("sse", c.startQuery()), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req.Header, tok)
	resp, err := c.o.http.Do(req)
	if err != nil {
		return cause(rctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readError(resp)
	}
	c.opened()
	var asm assembler
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var m sseMessage
	var line []byte
	for {
		line, err = readLine(rd, line[:0])
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The gateway ends a stream silently when it shuts down.
				err = fmt.Errorf("%w (the event stream ended)", errShutdown)
			}
			return cause(rctx, err)
		}
		dog.touch()
		if len(line) > 0 {
			m.field(line)
			continue
		}
		if m.data == nil && !m.hasID {
			continue
		}
		err = c.sseEvent(rctx, &asm, &m, dog)
		m = sseMessage{}
		if err != nil {
			return cause(rctx, err)
		}
	}
}

// readLine appends the next line of rd to line, without its end (\n or
// \r\n; the gateway never ends lines with a lone \r).
func readLine(rd *bufio.Reader, line []byte) ([]byte, error) {
	for {
		part, err := rd.ReadSlice('\n')
		line = append(line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return line, err
		}
		line = line[:len(line)-1]
		return bytes.TrimSuffix(line, []byte{'\r'}), nil
	}
}

// field applies one line of an event.
func (m *sseMessage) field(line []byte) {
	name, value, _ := bytes.Cut(line, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch string(name) {
	case "event":
		m.event = string(value)
	case "data":
		if m.data != nil {
			m.data = append(m.data, '\n')
		}
		m.data = append(m.data, value...)
	case "id":
		m.id, m.hasID = string(value), true
	}
	// "retry": the client keeps its own backoff; ":" lines are comments.
}

// sseEvent applies one event: the id of a transaction's last event is its
// cursor (the events before it have none).
func (c *Client) sseEvent(ctx context.Context, asm *assembler, m *sseMessage, dog *watchdog) error {
	switch m.event {
	case "heartbeat":
		if !asm.pending() {
			return c.moveTo(ctx, m.id)
		}
		return nil
	case "token_expired":
		// Its id is the cursor of the last whole transaction sent.
		if m.hasID && !asm.pending() {
			if err := c.moveTo(ctx, m.id); err != nil {
				return err
			}
		}
		return errTokenExpired
	case "error":
		var e struct{ Code, Message string }
		if err := json.Unmarshal(m.data, &e); err != nil {
			return fmt.Errorf("an error event that is not JSON: %w", err)
		}
		if cannotContinue[e.Code] || e.Code == "spool_gone" {
			return conflict(e.Code, e.Message)
		}
		return &Error{Status: http.StatusBadGateway, Code: e.Code, Message: e.Message}
	}
	var w wireEvent
	if err := c.dec.event(m.data, &w); err != nil {
		return fmt.Errorf("an event that is not JSON: %w", err)
	}
	t, err := asm.add(&w, m.hasID, m.id)
	if err != nil || t == nil {
		return err
	}
	dog.pause()
	defer dog.touch()
	return c.deliver(ctx, t)
}
