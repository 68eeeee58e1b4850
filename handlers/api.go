// Package handlers holds the HTTP transports (pull/long-poll, SSE,
// WebSocket) and the admin API. Every error is a JSON object with a stable
// machine-readable code:
//
//	{"error":{"code":"invalid_cursor","message":"…"}}
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/bridge"
	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// API serves the public HTTP API.
type API struct {
	Streams *streams.Registry
	Hub     *hub.Hub
	// Bridges makes the bridges of reshards and MoveTables cutovers (GET
	// /v1/reshards reports them).
	Bridges *bridge.Bridger
	// Journals is the reshard journal registry (GET /v1/reshards).
	Journals *reshard.Registry
	Cursors  *hub.Cursors
	Store    store.Store
	Log      *slog.Logger
	// Each transport's configuration (config.go): zero values are not
	// usable, start from the Default… of each.
	AdminConfig     AdminConfig
	PullConfig      PullConfig
	SSEConfig       SSEConfig
	WebSocketConfig WebSocketConfig
	// Ready reports whether vtgate and the store are reachable.
	Ready func(ctx context.Context) error
	// Shutdown ends when the gateway begins to shut down: streaming
	// clients are then closed with a cursor to resume from. Nil: never.
	// A context, not a channel, so that each stream registers a function
	// to run then (context.AfterFunc) instead of keeping a goroutine
	// waiting for it.
	Shutdown context.Context
	// Replica names this process (as in webhook leases), for GET /v1/stats.
	Replica string
	// History holds recent samples of the stream metrics (GET /v1/stats).
	History *metrics.History
	// Topology, if set, is vtgate's view of the keyspaces' shards, shown
	// with each stream by GET /v1/stats.
	Topology func(ctx context.Context, keyspaces ...string) (source.Topology, error)
	// Webhooks, if set, lists a stream's webhooks by subscriber name with
	// whether one replica delivers it now (GET /v1/stats, subscribers).
	Webhooks func(ctx context.Context, stream string) (map[string]bool, error)

	// Verify, if set, verifies a token as the authentication middleware
	// does: a WebSocket client's refresh (wsrefresh.go). Nil when
	// authentication is off, where tokens neither expire nor refresh.
	Verify func(ctx context.Context, token string) (*auth.Principal, error)

	presence presence
	// flights collapses identical pull requests (collapse.go).
	flights flights

	// StreamDeleted, if set, removes what else belongs to a deleted stream
	// (its webhooks).
	StreamDeleted func(ctx context.Context, stream string) error
}

// Error is an API error.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int `json:"-"`
	// Restart, on a pull's 409 resume_impossible, is the URL a reader
	// starts again from (DESIGN §6.2).
	Restart string `json:"restart,omitempty"`
	// restartID is the id of that URL, set where the 409 is made (once
	// for every request collapsed on it).
	restartID string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func apiErr(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// WriteError writes err as the JSON error body. A store that cannot be
// reached is a 503 the client retries (store_unavailable, Retry-After);
// other errors that are not *Error become a 500 whose detail is logged,
// not sent.
func WriteError(w http.ResponseWriter, log *slog.Logger, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, store.ErrUnavailable):
		// The outage itself is logged once, when it starts and ends
		// (store/epoch); every refused request would flood the log.
		if log != nil {
			log.Debug("store unavailable", "err", err)
		}
		e = errStoreUnavailable
	default:
		if log != nil {
			log.Error("internal error", "err", err)
		}
		e = apiErr(http.StatusInternalServerError, "internal", "internal error")
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, map[string]any{"error": e})
}

// errStoreUnavailable: nothing was stored or read; readers already
// connected keep streaming meanwhile (DESIGN §12).
var errStoreUnavailable = &Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
	Message: "the gateway's store does not answer; nothing was stored: retry", RetryAfter: 2}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"encoding failed"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// stream looks up the stream named in the URL.
func (a *API) stream(ctx context.Context, name string) (*streams.Definition, error) {
	d, err := a.Streams.Get(ctx, name)
	if errors.Is(err, streams.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, "stream_not_found", "no stream named "+quoteJSON(name))
	}
	return d, err
}

// quoteJSON returns s as a JSON string literal, for names in error
// messages and hand-built JSON.
func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// open resolves where a reader starts and opens its subscription.
func (a *API) open(ctx context.Context, def *streams.Definition, token, subscriber, start string) (*hub.Subscription, error) {
	if err := a.checkReaderScope(ctx, def, subscriber); err != nil {
		return nil, err
	}
	s, err := a.Hub.Open(ctx, def, hub.From{Token: token, Subscriber: subscriber, Start: start})
	if errors.Is(err, store.ErrUnavailable) {
		return nil, err // a 503, also for a reference token the store holds
	}
	var ce *hub.CursorError
	if errors.As(err, &ce) {
		return nil, apiErr(http.StatusBadRequest, "invalid_cursor", ce.Error())
	}
	var ge *reshard.GapError
	if errors.As(err, &ge) {
		return nil, apiErr(http.StatusConflict, "resume_impossible", ge.Error())
	}
	var ue *source.UpstreamError
	if errors.As(err, &ue) {
		return nil, upstreamError(ue)
	}
	return s, err
}

// upstreamRetryAfter is the Retry-After, in seconds, of a 503 for an
// unavailable vtgate: about the gateway's own reconnect interval.
const upstreamRetryAfter = 5

// upstreamError maps vtgate failing a request made for the client, a
// *source.UpstreamError or an error wrapping one (DESIGN §11 rule 4): 503
// upstream_unavailable with Retry-After while vtgate cannot be reached or
// does not answer in time, 502 upstream_failed when it refused.
// The 503 names what was asked, not gRPC's transport detail (vtgate's
// address); a 502 carries vtgate's refusal, which is what the client needs.
func upstreamError(err error) *Error {
	if source.Unavailable(err) {
		what := "the request"
		var ue *source.UpstreamError
		if errors.As(err, &ue) {
			what = ue.Op
		}
		e := apiErr(http.StatusServiceUnavailable, "upstream_unavailable",
			fmt.Sprintf("vtgate is unavailable (%s did not complete); retry in %d s", what, upstreamRetryAfter))
		e.RetryAfter = upstreamRetryAfter
		return e
	}
	return apiErr(http.StatusBadGateway, "upstream_failed", err.Error())
}

// readerParams resolves the stream named in the URL and the optional
// subscriber and start query parameters of a reading endpoint. On failure it
// has written the error response and ok is false.
// The request it returns carries the reader's format (formatParam) to its
// outbound step.
func (a *API) readerParams(w http.ResponseWriter, r *http.Request) (_ *http.Request, def *streams.Definition, sub, start string, ok bool) {
	def, err := a.stream(r.Context(), chi.URLParam(r, "stream"))
	if err == nil {
		sub, err = subscriberParam(r)
	}
	if err == nil {
		start, err = startParam(r)
	}
	var f *feed.Format
	if err == nil {
		f, err = formatParam(r, def.Name)
	}
	if err != nil {
		WriteError(w, a.Log, err)
		return r, nil, "", "", false
	}
	return r.WithContext(withFormat(r.Context(), f)), def, sub, start, true
}

// startParam validates the optional start query parameter: where a reader
// without a cursor begins, instead of the stream's start.
func startParam(r *http.Request) (string, error) {
	s := r.URL.Query().Get("start")
	switch s {
	case "", streams.StartNow, streams.StartSnapshot:
		return s, nil
	}
	return "", apiErr(http.StatusBadRequest, "invalid_start", "start must be \"now\" or \"snapshot\"")
}

// subscriberPath resolves /v1/streams/{stream}/subscribers/{subscriber}.
func (a *API) subscriberPath(w http.ResponseWriter, r *http.Request) (*streams.Definition, string, bool) {
	def, err := a.stream(r.Context(), chi.URLParam(r, "stream"))
	if err != nil {
		WriteError(w, a.Log, err)
		return nil, "", false
	}
	sub := chi.URLParam(r, "subscriber")
	if !streams.ValidName(sub) {
		WriteError(w, a.Log, apiErr(http.StatusBadRequest, "invalid_subscriber", "subscriber must be 1-64 characters of letters, digits, '_', '.', '-'"))
		return nil, "", false
	}
	if r.Method != http.MethodGet {
		if err := notWebhook(sub); err != nil {
			WriteError(w, a.Log, err)
			return nil, "", false
		}
	}
	return def, sub, true
}

// subscriberParam validates the optional subscriber query parameter.
func subscriberParam(r *http.Request) (string, error) {
	s := r.URL.Query().Get("subscriber")
	if s != "" && !streams.ValidName(s) {
		return "", apiErr(http.StatusBadRequest, "invalid_subscriber", "subscriber must be 1-64 characters of letters, digits, '_', '.', '-'")
	}
	if err := notWebhook(s); err != nil {
		return "", err
	}
	return s, nil
}

// notWebhook refuses webhook subscribers on the client endpoints: a
// webhook's cursor is written only by its lease holder, fenced, and an
// unfenced read-and-ack from a client would move it behind its back.
func notWebhook(sub string) error {
	if strings.HasPrefix(sub, "webhook.") {
		return apiErr(http.StatusBadRequest, "invalid_subscriber", "subscriber names starting with \"webhook.\" belong to webhooks; use the webhook API")
	}
	return nil
}

// streamError maps a subscription failure to an API error.
func streamError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ge *reshard.GapError
	if errors.As(err, &ge) {
		return apiErr(http.StatusConflict, "resume_impossible", ge.Error())
	}
	var td *upstream.TablesDroppedError
	if errors.As(err, &td) {
		return apiErr(http.StatusConflict, "tables_dropped", td.Error())
	}
	if errors.Is(err, hub.ErrSpoolGone) {
		return apiErr(http.StatusConflict, "spool_gone", err.Error())
	}
	if errors.Is(err, store.ErrUnavailable) {
		return errStoreUnavailable
	}
	return apiErr(http.StatusBadGateway, "upstream_failed", err.Error())
}
