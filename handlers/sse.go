package handlers

import (
	"bufio"
	"context"
	"errors"
	"net/http"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// SSE serves GET /v1/streams/{stream}/sse.
//
// Each event is `id: <cursor>` (on the last event of a transaction only, so
// a browser that reconnects mid-transaction resumes before it and never
// skips part of one; the pieces of a chunked transaction have none before
// its last, DESIGN §3.1), `event: <type>`, `data: <json>`. The browser's
// Last-Event-ID header resumes; for a named subscriber it is also the ack of
// everything before it.
func (a *API) SSE(w http.ResponseWriter, r *http.Request) {
	r, def, sub, start, ok := a.readerParams(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	defer a.present(def.Name, sub)()
	var err error
	token := r.Header.Get("Last-Event-ID")
	ackLater := false
	if sub != "" && token != "" {
		// A browser reconnecting sends the id of the last event it
		// received: everything before it reached the client. While the
		// store is unavailable the stream still opens from that id and
		// the ack is retried in the background (acker).
		_, err = a.ack(r, def, sub, token)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			ackLater = true
		case err != nil:
			WriteError(w, a.Log, err)
			return
		}
	}
	if token == "" {
		token = r.URL.Query().Get("cursor")
	}
	s, err := a.open(ctx, def, token, sub, start)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	out := &sseSink{w: bw, flush: func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}}
	// Tell the client to retry quickly, and give it the starting cursor.
	bw.WriteString("retry: 1000\n\n")
	out.flush()

	defer s.Close()
	out.last, _ = s.Cursor(ctx) // where the client resumes if nothing is sent
	// On shutdown the stream just ends: the browser reconnects (to another
	// replica) with Last-Event-ID, the cursor of the last whole transaction.
	ctx, stop := a.untilShutdown(ctx)
	defer stop()
	ctx, stopExpiry := untilExpiry(ctx)
	defer stopExpiry()
	if ackLater {
		acks := a.newAcker(ctx, r.Context(), def, sub, "sse", func(err error) {
			a.Log.Warn("sse: the Last-Event-ID ack was refused", "stream", def.Name, "subscriber", sub, "err", err)
		})
		acks.offer(token)
		defer acks.wait()
		defer stop() // the acker's last attempt runs once the stream ends
	}
	err = pump(ctx, s, a.scoped(ctx, def.Name, "sse", out), a.SSEConfig.CursorHeartbeat)
	if errors.Is(context.Cause(ctx), errTokenExpired) && r.Context().Err() == nil {
		out.expired()
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		a.Log.Warn("sse stream ended", "stream", def.Name, "err", err)
		c, _ := s.Cursor(ctx)
		out.error(streamError(err), c)
	}
}

type sseSink struct {
	w     *bufio.Writer
	flush func() error
	buf   []byte
	// last is the cursor of the last whole transaction sent (or passed
	// over, emptied by the token's scope), for the token_expired event.
	last string
}

// errTokenExpired is the cause of a stream's end at its token's exp.
var errTokenExpired = errors.New("token expired")

// untilExpiry returns ctx ending, with cause errTokenExpired, at the exp of
// the request's token. An SSE stream cannot take a fresh token in-band (the
// browser's EventSource sends nothing after its request): it ends at exp
// with a token_expired event, and the client opens a new one with a fresh
// token from its cursor. Without a principal, or with authentication off,
// nothing expires.
func untilExpiry(ctx context.Context) (context.Context, context.CancelFunc) {
	p := auth.FromContext(ctx)
	if p == nil || p.Anonymous || p.Expires.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadlineCause(ctx, p.Expires, errTokenExpired)
}

func (s *sseSink) deliver(d *hub.Delivery, more bool) error {
	for i := range d.Events {
		e := &d.Events[i]
		if i == len(d.Events)-1 && d.Cursor != "" {
			s.last = d.Cursor
			s.w.WriteString("id: ")
			s.w.WriteString(d.Cursor)
			s.w.WriteByte('\n')
		}
		s.w.WriteString("event: ")
		s.w.WriteString(string(e.Type))
		s.w.WriteString("\ndata: ")
		s.buf = e.AppendJSON(s.buf[:0], d.Cursor)
		s.w.Write(s.buf)
		s.w.WriteString("\n\n")
	}
	if len(d.Events) == 0 && d.Cursor != "" {
		s.last = d.Cursor // a transaction the scope emptied: passed over whole
	}
	if more && s.w.Buffered() < 16<<10 {
		return nil
	}
	return s.flush()
}

func (s *sseSink) flushHeld() error {
	if s.w.Buffered() == 0 {
		return nil
	}
	return s.flush()
}

func (s *sseSink) heartbeat(cursor string) error {
	s.last = cursor
	s.w.WriteString("id: ")
	s.w.WriteString(cursor)
	s.w.WriteString("\nevent: heartbeat\ndata: {\"type\":\"heartbeat\",\"cursor\":\"")
	s.w.WriteString(cursor)
	s.w.WriteString("\"}\n\n")
	return s.flush()
}

// error reports a failure that ends the stream as a final event.
func (s *sseSink) error(err error, cursor string) {
	var e *Error
	if !errors.As(err, &e) {
		e = apiErr(http.StatusBadGateway, "upstream_failed", err.Error())
	}
	s.w.WriteString("event: error\ndata: ")
	b := []byte(`{"type":"error","code":` + quoteJSON(e.Code) + `,"message":` + quoteJSON(e.Message))
	if cursor != "" {
		b = append(b, `,"cursor":"`+cursor+`"`...)
	}
	s.w.Write(append(b, '}'))
	s.w.WriteString("\n\n")
	s.flush()
}

// expired ends the stream at the token's exp with a final event that
// EventSource clients can listen for (addEventListener("token_expired")),
// its id and data carrying the cursor of the last whole transaction sent.
func (s *sseSink) expired() {
	if s.last != "" {
		s.w.WriteString("id: " + s.last + "\n")
	}
	s.w.WriteString("event: token_expired\ndata: ")
	b := []byte(`{"type":"token_expired","message":"token expired; open a new stream with a fresh token and resume from cursor"`)
	if s.last != "" {
		b = append(b, `,"cursor":"`+s.last+`"`...)
	}
	s.w.Write(append(b, '}'))
	s.w.WriteString("\n\n")
	s.flush()
}
