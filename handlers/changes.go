package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

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
// long-polling up to wait when nothing is new.
func (a *API) Changes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	def, err := a.stream(ctx, chi.URLParam(r, "stream"))
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), a.PullConfig.DefaultLimit, 1, a.PullConfig.MaxLimit, "limit")
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	wait, err := durationParam(q.Get("wait"), a.PullConfig.MaxWait)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	wait = untilTokenExpiry(ctx, wait)
	sub, err := subscriberParam(r)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	start, err := startParam(r)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	f, err := formatParam(r, def.Name)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	ctx = withFormat(ctx, f)
	defer a.present(def.Name, sub)()
	s, err := a.open(ctx, def, q.Get("cursor"), sub, start)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	ndjson := strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
	page := getPage()
	b := &batch{buf: *page, ndjson: ndjson}
	defer func() { *page = b.buf; putPage(page) }() // b.buf may have grown
	if !ndjson {
		b.buf = append(b.buf, `{"events":[`...)
	}
	err = a.collect(ctx, s, b, limit, wait)
	if err != nil {
		s.Close()
		WriteError(w, a.Log, streamError(err))
		return
	}
	a.Hub.Park(s)

	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Vsg-Next-Cursor", b.cursor)
	h.Set("Vsg-Up-To-Date", strconv.FormatBool(b.upToDate))
	// The page is whole in memory: a Content-Length spares both ends the
	// chunked encoding of a response that can run to megabytes.
	if ndjson {
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Content-Length", strconv.Itoa(len(b.buf)))
		w.Write(b.buf)
		return
	}
	h.Set("Content-Type", "application/json")
	b.buf = append(b.buf, `],"next_cursor":"`...)
	b.buf = append(b.buf, b.cursor...)
	b.buf = append(b.buf, `","up_to_date":`...)
	b.buf = strconv.AppendBool(b.buf, b.upToDate)
	b.buf = append(b.buf, "}\n"...)
	h.Set("Content-Length", strconv.Itoa(len(b.buf)))
	w.Write(b.buf)
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
	c := feed.NewCollector(scopedFeed{s, outboundFor(ctx, s.Definition().Name, "pull")}, opts...)
	res, err := c.Collect(ctx, b, feed.Limits{Events: limit})
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

// scopedFeed applies a pull request's outbound step as the collector reads:
// the page counts only the events the token may see.
type scopedFeed struct {
	*hub.Subscription
	o *outbound
}

func (f scopedFeed) Next(ctx context.Context) (*hub.Delivery, error) {
	d, err := f.Subscription.Next(ctx)
	if err != nil {
		return nil, err
	}
	return f.o.apply(d), nil
}

func (f scopedFeed) TryNext(ctx context.Context) (*hub.Delivery, bool, error) {
	d, ok, err := f.Subscription.TryNext(ctx)
	if !ok || err != nil {
		return d, ok, err
	}
	return f.o.apply(d), true, nil
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
