package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

var (
	keyCursor       = []byte(`"cursor":"`)
	txnEnd          = []byte(`"txn_end":true}`)
	txnEndBatch     = []byte(`"txn_end":true}]`)
	heartbeatPrefix = []byte(`{"type":"heartbeat"`)
	disconnectMsg   = []byte(`{"type":"disconnect"`)
)

func (e *env) authHeader() http.Header {
	h := http.Header{}
	if e.token != "" {
		h.Set("Authorization", "Bearer "+e.token)
	}
	return h
}

// query is the stream position to resume from, if any.
func (r *reader) query() url.Values {
	q := url.Values{}
	if len(r.cursor) > 0 {
		q.Set("cursor", string(r.cursor))
	}
	return q
}

// gatewayMessage handles one WebSocket message of the gateway. A cursor is
// taken only where it is safe to resume from: the last event of a
// transaction ("txn_end"), a heartbeat, and the disconnect message the
// gateway sends before closing a client.
func (r *reader) gatewayMessage(msg []byte, now int64) {
	r.msgs.Add(1)
	if n := scanRows(msg, r.env.marker, func(seq, ts int64) { r.row(seq, ts, now) }); n > 0 {
		r.malformed.Add(int64(n))
	}
	if bytes.HasSuffix(msg, txnEnd) || bytes.HasSuffix(msg, txnEndBatch) ||
		bytes.HasPrefix(msg, heartbeatPrefix) || bytes.HasPrefix(msg, disconnectMsg) {
		if c := stringField(msg, keyCursor); len(c) > 0 {
			r.cursor = append(r.cursor[:0], c...)
			r.markReady(now)
		}
	}
}

// wsSession reads the gateway's WebSocket, one JSON message per event (or
// per transaction with batch=txn).
func wsSession(ctx context.Context, r *reader, connected *bool) error {
	q := r.query()
	if r.env.batchTxn {
		q.Set("batch", "txn")
	}
	c, err := dialWS(ctx, r.env.addr, "/v1/streams/"+url.PathEscape(r.env.stream)+"/ws?"+q.Encode(), r.env.authHeader())
	if err != nil {
		return err
	}
	*connected = true
	defer context.AfterFunc(ctx, c.close)()
	r.setStop(c.close)
	defer c.close()
	return c.each(func(msg []byte, now int64) error {
		r.arrived = c.arrived
		r.gatewayMessage(msg, now)
		return nil
	})
}

// sseClient is the HTTP client of SSE readers: one connection per stream,
// small buffers.
type sseClient struct{ hc *http.Client }

func newSSEClient() *sseClient {
	return &sseClient{hc: &http.Client{Transport: &http.Transport{
		DisableKeepAlives:  true,
		DisableCompression: true,
		ReadBufferSize:     4096,
		WriteBufferSize:    1024,
	}}}
}

// sseSession reads the gateway's event stream as a browser's EventSource
// does: an event is dispatched at its blank line, and only then does its
// id become the position to resume from (Last-Event-ID). Taking the id when
// its line is read would skip the event's data on a reconnect in between.
func sseSession(ctx context.Context, r *reader, connected *bool) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, "GET", "http://"+r.env.addr+"/v1/streams/"+url.PathEscape(r.env.stream)+"/sse", nil)
	req.Header = r.env.authHeader()
	req.Header.Set("Accept", "text/event-stream")
	if len(r.cursor) > 0 {
		req.Header.Set("Last-Event-ID", string(r.cursor))
	}
	resp, err := r.env.sse.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &httpError{status: resp.StatusCode}
	}
	*connected = true
	r.setStop(cancel)
	br := bufio.NewReaderSize(resp.Body, 4096)
	var long []byte // a line longer than the buffer
	var id []byte
	hasID := false
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, line...)
			continue
		}
		if err != nil {
			return err
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\n'})
		switch {
		case len(line) == 0: // dispatch
			if hasID {
				r.cursor = append(r.cursor[:0], id...)
				r.markReady(time.Now().UnixNano())
				hasID = false
			}
		case bytes.HasPrefix(line, []byte("data: ")):
			now := time.Now().UnixNano()
			r.msgs.Add(1)
			if n := scanRows(line, r.env.marker, func(seq, ts int64) { r.row(seq, ts, now) }); n > 0 {
				r.malformed.Add(int64(n))
			}
		case bytes.HasPrefix(line, []byte("id: ")):
			id = append(id[:0], line[4:]...)
			hasID = true
		}
	}
}

// pullClient is the HTTP client of pull readers, keeping connections alive
// between polls.
type pullClient struct{ hc *http.Client }

func newPullClient(conns int) *pullClient {
	return &pullClient{hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        conns,
		DisableCompression:  true,
		ReadBufferSize:      4096,
		WriteBufferSize:     1024,
	}}}
}

// pullSession long-polls the changes endpoint (NDJSON, one event per line)
// and follows Vsg-Next-Cursor, passing back Vsg-Scope and Vsg-Interval as
// a client of a cache does. The first poll of a reader without a cursor
// asks without waiting, which answers at once with the current position;
// with --pull-in-step every reader starts from one cursor, which it knows
// before its first poll.
func pullSession(ctx context.Context, r *reader, connected *bool) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.setStop(cancel)
	if len(r.cursor) == 0 && r.env.pullStart != "" {
		r.cursor = append(r.cursor[:0], r.env.pullStart...)
		r.markReady(time.Now().UnixNano())
	}
	var body bytes.Buffer
	for {
		q := r.query()
		q.Set("limit", "1000")
		if len(r.cursor) > 0 {
			q.Set("wait", r.env.pullWait.String())
		} else {
			q.Set("wait", "0s")
		}
		if r.scope != "" {
			q.Set("scope", r.scope)
		}
		if r.interval != "" {
			q.Set("interval", r.interval)
		}
		req, _ := http.NewRequestWithContext(cctx, "GET", r.env.pullBase+"/v1/streams/"+url.PathEscape(r.env.stream)+"/changes?"+q.Encode(), nil)
		req.Header = r.env.authHeader()
		req.Header.Set("Accept", "application/x-ndjson")
		r.env.pullRequests.Add(1)
		resp, err := r.env.pull.hc.Do(req)
		if err != nil {
			return err
		}
		body.Reset()
		_, err = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return &httpError{status: resp.StatusCode, body: body.String()}
		}
		*connected = true
		now := time.Now().UnixNano()
		b := body.Bytes()
		r.msgs.Add(int64(bytes.Count(b, []byte{'\n'})))
		if n := scanRows(b, r.env.marker, func(seq, ts int64) { r.row(seq, ts, now) }); n > 0 {
			r.malformed.Add(int64(n))
		}
		r.scope, r.interval = resp.Header.Get("Vsg-Scope"), resp.Header.Get("Vsg-Interval")
		if c := resp.Header.Get("Vsg-Next-Cursor"); c != "" {
			r.cursor = append(r.cursor[:0], c...)
			r.markReady(now)
		}
	}
}

// headCursor asks the live end's cursor once (--pull-in-step).
func headCursor(ctx context.Context, e *env) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+e.addr+"/v1/streams/"+url.PathEscape(e.stream)+"/changes?wait=0s&limit=1", nil)
	req.Header = e.authHeader()
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := e.pull.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	c := resp.Header.Get("Vsg-Next-Cursor")
	if resp.StatusCode != http.StatusOK || c == "" {
		return "", fmt.Errorf("the live end's cursor: %d, cursor %q", resp.StatusCode, c)
	}
	return c, nil
}

// gatewayPulls is how many pull requests the gateway has served (its
// vsg_http_requests_total for the changes route), or -1 when it cannot
// tell (another target, /metrics not answering).
func gatewayPulls(ctx context.Context, cfg *config) float64 {
	if cfg.target != "gateway" || cfg.pull == 0 {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(cfg.url, "/")+"/metrics", nil)
	if cfg.token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "vsg_http_requests_total{") || !strings.Contains(line, `route="/v1/streams/{stream}/changes"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}
