package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// pullRequest is a pull request's parameters, checked.
type pullRequest struct {
	def        *streams.Definition
	limit      int
	wait       time.Duration // cut at the token's exp
	sub, start string
	cursor     string
	ndjson     bool
	format     *feed.Format // nil: the default format (DESIGN §3.2)
	scope      string       // the token's scope hash on the stream
	interval   int64        // interval= (-1: none)
	// shareable: the URL names the token's scope (scope=), or there is no
	// token (authentication off), so that a cache keyed on the URL keeps
	// a page for the requests of this scope only.
	shareable bool
	// key collapses identical requests; empty: this one is not collapsed
	// (a named subscriber, a token that expires within the wait).
	key string
	// collapsed: the request was made on key (set by page).
	collapsed bool
}

// page is one page made, ready to write, perhaps to many requests.
type page struct {
	buf        *[]byte
	pooled     bool // buf returns to the free list once written
	cursor     string
	upToDate   bool
	progressed bool   // the cursor moved (or the request had none)
	interval   int64  // handed out as Vsg-Interval
	etag       string // with Cache on
	// keep: worth keeping after its flight for the requests just behind
	// (a page that did not move the cursor is not: its requester would
	// get it again at once).
	keep bool
}

func (pg *page) release() {
	if pg.pooled {
		putPage(pg.buf)
	}
}

// pullParams checks a pull request's parameters.
func (a *API) pullParams(r *http.Request) (*pullRequest, error) {
	ctx := r.Context()
	def, err := a.stream(ctx, chi.URLParam(r, "stream"))
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	req := &pullRequest{def: def, cursor: q.Get("cursor"), interval: -1,
		ndjson: strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")}
	if req.limit, err = intParam(q.Get("limit"), a.PullConfig.DefaultLimit, 1, a.PullConfig.MaxLimit, "limit"); err != nil {
		return nil, err
	}
	asked, err := durationParam(q.Get("wait"), a.PullConfig.MaxWait)
	if err != nil {
		return nil, err
	}
	req.wait = untilTokenExpiry(ctx, asked)
	if req.sub, err = subscriberParam(r); err != nil {
		return nil, err
	}
	if req.start, err = startParam(r); err != nil {
		return nil, err
	}
	if req.format, err = formatParam(r, def.Name); err != nil {
		return nil, err
	}
	if err := req.cacheParams(r); err != nil {
		return nil, err
	}
	// A token that expires within the wait (or the first wait) has its
	// own page: another request's would hold it past its exp.
	if req.sub == "" && untilTokenExpiry(ctx, max(a.PullConfig.FirstWait, asked)) == max(a.PullConfig.FirstWait, asked) {
		req.key = collapseKey(def.Name, req.scope, req.ndjson, q)
	}
	return req, nil
}

// cacheParams checks the parameters that address a page for caches:
// scope (the token's scope hash: another is refused, so that a page kept
// under one scope's URL is never made for another's token), interval and
// restart (which only key the URL).
func (req *pullRequest) cacheParams(r *http.Request) error {
	q := r.URL.Query()
	p := auth.FromContext(r.Context())
	req.scope = scopeHash(req.def.Name, p)
	req.shareable = p == nil || p.Anonymous
	if s, ok := q["scope"]; ok {
		if len(s) != 1 || s[0] != req.scope {
			return &scopeMismatch{err: apiErr(http.StatusForbidden, "scope_mismatch",
				"the scope parameter is not the hash of this token's table scope on the stream (Vsg-Scope names it)"), scope: req.scope}
		}
		req.shareable = true
	}
	if s := q.Get("interval"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return apiErr(http.StatusBadRequest, "invalid_interval", "interval must be the non-negative integer of a page's Vsg-Interval")
		}
		req.interval = n
	}
	if s, ok := q["restart"]; ok && (len(s) != 1 || !validRestart(s[0])) {
		return apiErr(http.StatusBadRequest, "invalid_restart", "restart must be the value of a 409's restart URL")
	}
	return nil
}

// scopeMismatch is the 403 of a scope parameter that is not the token's,
// with the token's (sent as Vsg-Scope).
type scopeMismatch struct {
	err   *Error
	scope string
}

func (e *scopeMismatch) Error() string { return e.err.Error() }
func (e *scopeMismatch) Unwrap() error { return e.err }

// page makes the request's page, or takes the one an identical request
// in flight makes.
func (a *API) page(ctx context.Context, req *pullRequest) (*page, error) {
	if req.key == "" {
		pg, err := a.makePageOf(ctx, req, getPage())
		if pg != nil {
			pg.pooled = true
		}
		return pg, err
	}
	req.collapsed = true
	var keep time.Duration
	if a.PullConfig.Cache {
		keep = a.PullConfig.LiveMaxAge
	}
	pg, shared, err := a.flights.do(ctx, req.key, keep, func(ctx context.Context) (*page, error) {
		return a.makePageOf(ctx, req, new([]byte))
	})
	if shared {
		metrics.PullCollapsed(req.def.Name)
	}
	return pg, err
}

// makePageOf is makePage with what a page's every reader shares: its
// interval, ETag, and the restart id of a 409.
func (a *API) makePageOf(ctx context.Context, req *pullRequest, buf *[]byte) (*page, error) {
	pg, err := a.makePage(ctx, req, buf)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == "resume_impossible" && req.sub == "" {
			c := *e
			c.restartID = restartID(time.Now())
			return nil, &c
		}
		return nil, err
	}
	pg.interval = nextInterval(req.interval, pg.progressed, time.Now())
	pg.keep = pg.progressed
	if a.PullConfig.Cache {
		pg.etag = etagOf(*pg.buf)
	}
	return pg, nil
}

// writePage writes a page with its headers; a request naming the page's
// ETag in If-None-Match gets a 304.
func (a *API) writePage(w http.ResponseWriter, r *http.Request, req *pullRequest, pg *page) {
	h := w.Header()
	cc, kind := a.cacheControl(req, pg)
	h.Set("Cache-Control", cc)
	h.Set("Vary", "Accept")
	h.Set("Vsg-Next-Cursor", pg.cursor)
	h.Set("Vsg-Up-To-Date", strconv.FormatBool(pg.upToDate))
	h.Set("Vsg-Scope", req.scope)
	h.Set("Vsg-Interval", strconv.FormatInt(pg.interval, 10))
	if kind != "" {
		metrics.PullCacheable(req.def.Name, kind)
		h.Set("ETag", pg.etag)
		if notModified(r, pg.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if req.ndjson {
		h.Set("Content-Type", "application/x-ndjson")
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(*pg.buf)))
	w.Write(*pg.buf)
}

// pullError writes a pull request's error: no-store, except a 409
// resume_impossible for a reader without a subscriber, which names where
// to start again (Vsg-Restart, restart) and which a cache may keep: every
// request with that cursor gets the same answer, at once, and following
// it leads to rows (DESIGN §6.2).
func (a *API) pullError(w http.ResponseWriter, r *http.Request, req *pullRequest, err error) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	var e *Error
	if errors.As(err, &e) && e.restartID != "" {
		c := *e
		c.Restart = restartURL(r, e.restartID)
		h.Set("Vsg-Restart", c.Restart)
		h.Set("Vsg-Scope", req.scope)
		if a.PullConfig.Cache && req.shareable {
			h.Set("Cache-Control", maxAge(conflictMaxAge, conflictMaxAge))
			metrics.PullCacheable(req.def.Name, metrics.PullConflict)
		}
		err = &c
	}
	WriteError(w, a.Log, err)
}
