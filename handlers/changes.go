package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
)

// batch is what one pull request returns.
type batch struct {
	// buf holds the events: NDJSON lines, or for JSON the opening of the
	// response object and the events, comma-separated.
	buf      []byte
	ndjson   bool
	count    int
	cursor   string
	upToDate bool
}

// pages recycles response buffers: a replaying client pulls pages of
// megabytes back to back, and growing a fresh buffer for each one (copies,
// zeroing, then the collector's work) cost a third of the pull path's CPU.
// A small free list rather than a sync.Pool: a busy gateway collects
// garbage many times a second, and a pool is emptied by every collection.
var pages = make(chan *[]byte, 4)

// maxPooledPage keeps an outsized page (huge rows) from pinning its memory.
const maxPooledPage = 8 << 20

func getPage() *[]byte {
	select {
	case b := <-pages:
		return b
	default:
		return new([]byte)
	}
}

func putPage(b *[]byte) {
	if cap(*b) > maxPooledPage {
		return
	}
	*b = (*b)[:0]
	select {
	case pages <- b:
	default:
	}
}

// Changes serves GET /v1/streams/{stream}/changes: one batch of whole
// transactions after cursor (a huge one cut at limit, DESIGN §3.1 rule 4),
// long-polling up to wait when nothing is new. Identical requests in
// flight get one page, and pages say when a cache may keep them (DESIGN
// §6.2, pullpage.go).
func (a *API) Changes(w http.ResponseWriter, r *http.Request) {
	req, err := a.pullParams(r)
	if err != nil {
		w.Header().Set("Cache-Control", "no-store")
		if sm, ok := err.(*scopeMismatch); ok {
			w.Header().Set("Vsg-Scope", sm.scope)
		}
		WriteError(w, a.Log, err)
		return
	}
	defer a.present(req.def.Name, req.sub)()
	pg, err := a.page(r.Context(), req)
	if err != nil && errors.Is(r.Context().Err(), context.Canceled) {
		return // the client went away: nobody reads an answer, nor is it an error of ours
	}
	if err != nil {
		a.pullError(w, r, req, err)
		return
	}
	defer pg.release()
	a.writePage(w, r, req, pg)
}

// makePage opens the request's subscription, collects its page into buf
// and parks the subscription for the next page.
func (a *API) makePage(ctx context.Context, req *pullRequest, buf *[]byte) (*page, error) {
	s, err := a.open(ctx, req.def, req.cursor, req.sub, req.start)
	if err != nil {
		return nil, err
	}
	ctx = withFormat(ctx, req.format) // the outbound step's (DESIGN §3.2)
	b := &batch{buf: (*buf)[:0], ndjson: req.ndjson}
	defer func() { *buf = b.buf }() // b.buf may have grown
	if !req.ndjson {
		b.buf = append(b.buf, `{"events":[`...)
	}
	err = a.collect(ctx, s, b, req.limit, req.wait)
	if err != nil {
		s.Close()
		return nil, streamError(err)
	}
	a.Hub.Park(s)
	// The page is whole in memory: a Content-Length spares both ends the
	// chunked encoding of a response that can run to megabytes.
	if !req.ndjson {
		b.buf = append(b.buf, `],"next_cursor":"`...)
		b.buf = append(b.buf, b.cursor...)
		b.buf = append(b.buf, `","up_to_date":`...)
		b.buf = strconv.AppendBool(b.buf, b.upToDate)
		b.buf = append(b.buf, "}\n"...)
	}
	return &page{buf: buf, cursor: b.cursor, upToDate: b.upToDate, progressed: b.cursor != req.cursor}, nil
}

// collect reads one page: whole transactions up to limit events, or as
// many as are ready; inside a transaction delivered in pieces (a huge one)
// the page ends at limit, its cursor resuming inside it. With wait > 0 it long-polls for the first transaction
// that carries events; otherwise it waits only as long as a freshly opened
// VStream needs to produce its first data.
func (a *API) collect(ctx context.Context, s *hub.Subscription, b *batch, limit int, wait time.Duration) error {
	// The subscription is parked between pages: the collector lives for
	// this page only, and holds nothing back for the next one.
	opts := []feed.CollectOption{feed.FirstWait(untilTokenExpiry(ctx, max(a.PullConfig.FirstWait, wait))), feed.NoHoldBack(), feed.EndInside()}
	if wait == 0 {
		// Without wait, any delivery is news to a client at the live end (a
		// position update); a replay or snapshot waits (up to FirstWait) for
		// its first rows, so the first page is not an empty one.
		opts = append(opts, feed.WaitWhile(func() bool { return s.Fresh() || !s.CaughtUp() }))
	}
	lim := feed.Limits{Events: limit}
	if wait > 0 && s.CaughtUp() {
		// A long-poll at the live end: the transactions of the next
		// LiveLinger join the first, one page for them all.
		lim.Linger = a.PullConfig.LiveLinger
	}
	// The outbound step applied as the collector reads: the page counts
	// only the events the token may see.
	c := feed.NewCollector(feed.Mapped(s, outboundFor(ctx, s.Definition().Name, "pull").apply), opts...)
	res, err := c.Collect(ctx, b, lim)
	if err != nil {
		return err
	}
	// A later error is dropped with the collector: it recurs on the next
	// request.
	switch {
	case res.Drained:
		b.upToDate = s.CaughtUp()
	case res.TimedOut:
		// Timed out, then the page filled with what arrived meanwhile.
		b.upToDate = s.CaughtUp() || wait > 0
	}
	b.cursor = res.Cursor
	if s.InTxn() {
		// The page ended inside a transaction delivered in pieces: its
		// cursor resumes exactly there (DESIGN §3.1), and the rest of
		// the transaction is news however current it is.
		b.upToDate = false
		b.cursor = ""
	}
	if b.cursor == "" {
		tok, err := s.ResumeCursor(ctx)
		if err != nil {
			return err
		}
		if tok == "" {
			// A stream starting at "now" has not reported its position
			// yet: an empty cursor would make the next poll start at a
			// later "now" and skip what committed in between.
			e := apiErr(http.StatusServiceUnavailable, "upstream_unavailable", "the stream has not reported its position yet; retry")
			e.RetryAfter = upstreamRetryAfter
			return e
		}
		b.cursor = tok
	}
	return nil
}

// Add implements feed.Batch: it appends the transaction's events as NDJSON
// lines or as members of the JSON array.
func (b *batch) Add(d *hub.Delivery) {
	for i := range d.Events {
		e := &d.Events[i]
		if b.ndjson {
			b.buf = e.AppendJSON(b.buf, d.Cursor)
			b.buf = append(b.buf, '\n')
		} else {
			if b.count > 0 {
				b.buf = append(b.buf, ',')
			}
			b.buf = e.AppendJSON(b.buf, d.Cursor)
		}
		b.count++
	}
}

func intParam(s string, def, min, max int, name string) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return 0, apiErr(http.StatusBadRequest, "invalid_"+name, name+" must be an integer >= "+strconv.Itoa(min))
	}
	if n > max {
		n = max
	}
	return n, nil
}

// durationParam accepts "10s", "1500ms" or plain seconds ("10"), capped.
func durationParam(s string, max time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, err2 := strconv.ParseFloat(s, 64)
		if err2 != nil || secs != secs {
			return 0, apiErr(http.StatusBadRequest, "invalid_wait", "wait must be a duration like 10s or a number of seconds")
		}
		if secs > max.Seconds() {
			secs = max.Seconds()
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, apiErr(http.StatusBadRequest, "invalid_wait", "wait must not be negative")
	}
	if d > max {
		d = max
	}
	return d, nil
}

// untilTokenExpiry cuts a long-poll's wait at the exp of the request's
// token: a page answers with what arrived before exp, never holds the
// request open past it to hand over rows the token no longer covers
// (WebSocket and SSE end at exp likewise). The next request, with an
// expired token, is refused with 401; with a fresh one it resumes from
// the page's cursor.
func untilTokenExpiry(ctx context.Context, wait time.Duration) time.Duration {
	p := auth.FromContext(ctx)
	if p == nil || p.Anonymous || p.Expires.IsZero() {
		return wait
	}
	return max(0, min(wait, time.Until(p.Expires)))
}
