package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"
)

// ev is a delivered event as a client sees it.
type ev struct {
	Type   string                     `json:"type"`
	Op     string                     `json:"op"`
	Shard  string                     `json:"shard"`
	Table  string                     `json:"table"`
	Key    map[string]json.RawMessage `json:"key"`
	After  map[string]json.RawMessage `json:"after"`
	Before map[string]json.RawMessage `json:"before"`
	Cursor string                     `json:"cursor"`
	// TxnEnd: the event is the last of its transaction, as its transport
	// marks it — "txn_end" on WebSocket, an `id:` line on SSE, on pull the
	// last event of its transaction in a page (set by those clients). Every
	// event of a transaction carries the cursor after the whole of it: only
	// a TxnEnd event's is a place to resume or acknowledge with what was
	// read before it kept.
	TxnEnd bool            `json:"txn_end"`
	Raw    json.RawMessage `json:"-"`
}

func (e ev) str(col string) string {
	m := e.After
	if m == nil {
		m = e.Before
	}
	var s string
	json.Unmarshal(m[col], &s)
	return s
}

// client reads a stream through one transport.
type client interface {
	// next returns the next event (control events included).
	next(ctx context.Context) (ev, error)
	// ack confirms everything up to cursor (named subscribers).
	ack(ctx context.Context, cursor string) error
	close()
}

type connectFunc func(ctx context.Context, g *gateway, stream, subscriber, cursor string) (client, error)

var transports = map[string]connectFunc{
	"pull": connectPull,
	"sse":  connectSSE,
	"ws":   connectWS,
}

func query(subscriber, cursor string) string {
	q := url.Values{}
	if subscriber != "" {
		q.Set("subscriber", subscriber)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q.Encode()
}

// withExtra appends more query parameters to an encoded query.
func withExtra(q string, extra url.Values) string {
	if len(extra) == 0 {
		return q
	}
	if q == "" {
		return extra.Encode()
	}
	return q + "&" + extra.Encode()
}

// --- HTTP pull ---

type pullClient struct {
	g                  *gateway
	stream, subscriber string
	cursor             string
	buf                []ev
	extra              url.Values // more query parameters (format=…)
}

func connectPull(_ context.Context, g *gateway, stream, subscriber, cursor string) (client, error) {
	return &pullClient{g: g, stream: stream, subscriber: subscriber, cursor: cursor}, nil
}

func (c *pullClient) next(ctx context.Context) (ev, error) {
	for len(c.buf) == 0 {
		q := url.Values{"wait": {"5s"}, "limit": {"500"}}
		for k, v := range c.extra {
			q[k] = v
		}
		if c.cursor != "" {
			q.Set("cursor", c.cursor)
		} else if c.subscriber != "" {
			q.Set("subscriber", c.subscriber)
		}
		var out struct {
			Events     []json.RawMessage `json:"events"`
			NextCursor string            `json:"next_cursor"`
			UpToDate   bool              `json:"up_to_date"`
		}
		status, err := c.g.do(ctx, "GET", "/v1/streams/"+c.stream+"/changes?"+q.Encode(), nil, &out)
		if err != nil {
			return ev{}, err
		}
		if status != http.StatusOK {
			return ev{}, fmt.Errorf("pull: status %d", status)
		}
		page := make([]ev, 0, len(out.Events))
		for _, raw := range out.Events {
			e, err := parseEvent(raw)
			if err != nil {
				return ev{}, err
			}
			page = append(page, e)
		}
		// A page holds whole transactions (but a huge one, cut where
		// next_cursor, of version 2, resumes inside it): a transaction
		// ends where the cursor changes, and at the page's end.
		for i := range page {
			if i+1 < len(page) {
				page[i].TxnEnd = page[i].Cursor != "" && page[i+1].Cursor != page[i].Cursor
			} else {
				page[i].TxnEnd = page[i].Cursor != "" && !strings.HasPrefix(out.NextCursor, "2")
			}
		}
		c.buf = append(c.buf, page...)
		if out.NextCursor != "" {
			c.cursor = out.NextCursor
		}
	}
	e := c.buf[0]
	c.buf = c.buf[1:]
	return e, nil
}

func (c *pullClient) ack(ctx context.Context, cursor string) error {
	var out map[string]any
	status, err := c.g.do(ctx, "POST", "/v1/streams/"+c.stream+"/subscribers/"+c.subscriber+"/ack", map[string]string{"cursor": cursor}, &out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("ack: %d %v", status, out)
	}
	return err
}

func (c *pullClient) close() {}

func parseEvent(raw []byte) (ev, error) {
	var e ev
	if err := json.Unmarshal(raw, &e); err != nil {
		return ev{}, fmt.Errorf("bad event %s: %w", raw, err)
	}
	e.Raw = append(json.RawMessage(nil), raw...)
	if e.Type == "change" && e.Op == "" {
		if err := fromDebezium(&e); err != nil {
			return ev{}, fmt.Errorf("bad event %s: %w", raw, err)
		}
	}
	return e, nil
}

// fromDebezium fills a format=debezium change event's op, shard, table and
// images from its value, so that the tests' checks read both formats.
func fromDebezium(e *ev) error {
	var d struct {
		Value struct {
			Payload json.RawMessage `json:"payload"`
		} `json:"value"`
	}
	var env struct {
		Before, After map[string]json.RawMessage
		Op            string
		Source        struct{ Shard, Table string }
	}
	if err := json.Unmarshal(e.Raw, &d); err != nil {
		return err
	}
	value := d.Value.Payload
	if value == nil {
		var v struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(e.Raw, &v); err != nil {
			return err
		}
		value = v.Value
	}
	if err := json.Unmarshal(value, &env); err != nil {
		return err
	}
	e.Before, e.After, e.Shard, e.Table = env.Before, env.After, env.Source.Shard, env.Source.Table
	e.Op = map[string]string{"c": "insert", "u": "update", "d": "delete", "r": "snapshot"}[env.Op]
	return nil
}

// --- SSE ---

type sseClient struct {
	resp   *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
	g      *gateway
	stream string
	sub    string
	lastID string
	extra  url.Values
}

func connectSSE(ctx context.Context, g *gateway, stream, subscriber, cursor string) (client, error) {
	return connectSSEWith(ctx, g, stream, subscriber, cursor, nil)
}

// connectSSEWith is connectSSE with more query parameters (format=…).
func connectSSEWith(ctx context.Context, g *gateway, stream, subscriber, cursor string, extra url.Values) (client, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/streams/"+stream+"/sse?"+withExtra(query(subscriber, ""), extra), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if cursor != "" {
		// What a browser's EventSource sends when it reconnects.
		req.Header.Set("Last-Event-ID", cursor)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("sse: %d %s", resp.StatusCode, b)
	}
	return &sseClient{resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel, g: g, stream: stream, sub: subscriber, extra: extra}, nil
}

func (c *sseClient) next(ctx context.Context) (ev, error) {
	type res struct {
		e   ev
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var data bytes.Buffer
		typ, id := "", false
		for {
			line, err := c.rd.ReadString('\n')
			if err != nil {
				ch <- res{err: err}
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if data.Len() == 0 {
					continue
				}
				e, err := parseEvent(data.Bytes())
				e.TxnEnd = id // SSE puts id: on a transaction's last event only
				if err == nil && e.Type != typ {
					err = fmt.Errorf("sse event: field %q but data type %q", typ, e.Type)
				}
				ch <- res{e, err}
				return
			case strings.HasPrefix(line, "id: "):
				c.lastID, id = line[4:], true
			case strings.HasPrefix(line, "event: "):
				typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				data.WriteString(line[6:])
			}
		}
	}()
	select {
	case r := <-ch:
		return r.e, r.err
	case <-ctx.Done():
		c.close()
		<-ch
		return ev{}, ctx.Err()
	}
}

// ack for SSE: the next connection's Last-Event-ID acks; here the test
// reconnects with the cursor, which is what a browser does.
func (c *sseClient) ack(ctx context.Context, cursor string) error {
	c.close()
	nc, err := connectSSEWith(ctx, c.g, c.stream, c.sub, cursor, c.extra)
	if err != nil {
		return err
	}
	*c = *nc.(*sseClient)
	return nil
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// --- WebSocket ---

type wsClient struct {
	c    *websocket.Conn
	msgs chan []byte
	err  error // why msgs was closed
}

// connectWS connects and keeps reading in the background, as a browser
// does: a client that stops reading stops answering pings and is
// eventually closed, however idle its application is.
func connectWS(ctx context.Context, g *gateway, stream, subscriber, cursor string) (client, error) {
	return connectWSWith(ctx, g, stream, subscriber, cursor, nil)
}

// connectWSWith is connectWS with more query parameters (format=…).
func connectWSWith(ctx context.Context, g *gateway, stream, subscriber, cursor string, extra url.Values) (client, error) {
	u := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/streams/" + stream + "/ws?" + withExtra(query(subscriber, cursor), extra)
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	w := &wsClient{c: c, msgs: make(chan []byte, 1<<16)}
	go func() {
		defer close(w.msgs)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				w.err = err
				return
			}
			w.msgs <- b
		}
	}()
	return w, nil
}

func (c *wsClient) next(ctx context.Context) (ev, error) {
	select {
	case b, ok := <-c.msgs:
		if !ok {
			return ev{}, c.err
		}
		return parseEvent(b)
	case <-ctx.Done():
		return ev{}, ctx.Err()
	}
}

func (c *wsClient) ack(ctx context.Context, cursor string) error {
	b, _ := json.Marshal(map[string]string{"ack": cursor})
	return c.c.Write(ctx, websocket.MessageText, b)
}

func (c *wsClient) close() { c.c.Close(websocket.StatusNormalClosure, "") }
