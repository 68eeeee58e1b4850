package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/streams"
	"github.com/vstream-gateway/vstream-gateway/webhook"
)

// WebhookAPI serves /v1/streams/{stream}/webhooks: registering, listing,
// pausing and deleting webhooks, rotating their secrets, and their
// dead-letter lists. It shares the API's registry, limits and logger.
type WebhookAPI struct {
	*API
	Service *webhook.Service
}

// Dead-letter page sizes.
const (
	defaultDeadLetterPage = 50
	maxDeadLetterPage     = 500
)

// webhookError maps the service's errors to API errors.
func webhookError(err error) error {
	var (
		ve *webhook.ValidationError
		fe *webhook.ForbiddenAddressError
		ce *hub.CursorError
		re *webhook.ReplayError
	)
	switch {
	case errors.As(err, &ve):
		return apiErr(http.StatusBadRequest, "invalid_webhook", ve.Error())
	case errors.As(err, &fe):
		return apiErr(http.StatusBadRequest, "webhook_url_forbidden",
			"url: "+fe.Error()+"; webhooks may not reach loopback, private, link-local or other internal addresses unless the gateway runs with --allow-private-webhooks")
	case errors.Is(err, webhook.ErrForbiddenAddress):
		return apiErr(http.StatusBadRequest, "webhook_url_forbidden", "url: "+err.Error())
	case errors.As(err, &ce):
		return apiErr(http.StatusBadRequest, "invalid_cursor", ce.Error())
	case errors.Is(err, webhook.ErrNotFound):
		return apiErr(http.StatusNotFound, "webhook_not_found", "no webhook with that id on this stream")
	case errors.Is(err, webhook.ErrDeadLetterNotFound):
		return apiErr(http.StatusNotFound, "dead_letter_not_found", "no dead letter with that sequence number")
	case errors.Is(err, webhook.ErrUpstream):
		return upstreamError(err)
	case errors.As(err, &re):
		return apiErr(http.StatusBadGateway, "replay_failed", re.Error())
	}
	return err
}

// webhookRoute resolves the stream of the URL (and checks it exists).
func (a *WebhookAPI) webhookRoute(w http.ResponseWriter, r *http.Request) (*streams.Definition, bool) {
	if a.Service == nil {
		WriteError(w, a.Log, apiErr(http.StatusServiceUnavailable, "webhooks_unavailable", "webhooks are not enabled on this gateway"))
		return nil, false
	}
	def, err := a.stream(r.Context(), chi.URLParam(r, "stream"))
	if err != nil {
		WriteError(w, a.Log, err)
		return nil, false
	}
	return def, true
}

// CreateWebhook serves POST /v1/streams/{stream}/webhooks. The answer
// carries the secret; it is never shown again.
func (a *WebhookAPI) CreateWebhook(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	var req webhook.CreateRequest
	if err := a.decodeBody(w, r, &req); err != nil {
		WriteError(w, a.Log, err)
		return
	}
	v, err := a.Service.Create(r.Context(), def, &req)
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+v.ID)
	writeJSON(w, http.StatusCreated, v)
}

// ListWebhooks serves GET /v1/streams/{stream}/webhooks.
func (a *WebhookAPI) ListWebhooks(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	list, err := a.Service.List(r.Context(), def.Name)
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": list})
}

// GetWebhook serves GET /v1/streams/{stream}/webhooks/{webhook}.
func (a *WebhookAPI) GetWebhook(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	v, err := a.Service.Get(r.Context(), def.Name, chi.URLParam(r, "webhook"))
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// DeleteWebhook serves DELETE /v1/streams/{stream}/webhooks/{webhook}.
func (a *WebhookAPI) DeleteWebhook(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	if err := a.Service.Delete(r.Context(), def.Name, chi.URLParam(r, "webhook")); err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// PauseWebhook serves POST /v1/streams/{stream}/webhooks/{webhook}/pause.
func (a *WebhookAPI) PauseWebhook(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	v, err := a.Service.Pause(r.Context(), def.Name, chi.URLParam(r, "webhook"))
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// ResumeWebhook serves POST /v1/streams/{stream}/webhooks/{webhook}/resume:
// it also re-enables a webhook disabled by a 410.
func (a *WebhookAPI) ResumeWebhook(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	v, err := a.Service.Resume(r.Context(), def.Name, chi.URLParam(r, "webhook"))
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// RotateWebhookSecret serves POST
// /v1/streams/{stream}/webhooks/{webhook}/rotate-secret. The body is
// optional; the answer carries the new secret, shown this once.
func (a *WebhookAPI) RotateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	var req webhook.RotateRequest
	if r.ContentLength != 0 {
		if err := a.decodeBody(w, r, &req); err != nil {
			var e *Error
			// An empty body (chunked, so of unknown length) is no body.
			if !errors.As(err, &e) || e.Message != "request body is empty" {
				WriteError(w, a.Log, err)
				return
			}
		}
	}
	v, err := a.Service.RotateSecret(r.Context(), def.Name, chi.URLParam(r, "webhook"), &req)
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// ListDeadLetters serves GET
// /v1/streams/{stream}/webhooks/{webhook}/dead-letters?after=&limit=.
func (a *WebhookAPI) ListDeadLetters(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), defaultDeadLetterPage, 1, maxDeadLetterPage, "limit")
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	var after uint64
	if s := q.Get("after"); s != "" {
		if after, err = strconv.ParseUint(s, 10, 64); err != nil {
			WriteError(w, a.Log, apiErr(http.StatusBadRequest, "invalid_after", "after must be a dead letter sequence number (an integer >= 0)"))
			return
		}
	}
	list, next, err := a.Service.DeadLetters(r.Context(), def.Name, chi.URLParam(r, "webhook"), after, limit)
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	if list == nil {
		list = []*webhook.DeadLetter{}
	}
	out := map[string]any{"dead_letters": list}
	if next > 0 {
		out["next_after"] = next
	}
	writeJSON(w, http.StatusOK, out)
}

// ReplayDeadLetter serves POST
// /v1/streams/{stream}/webhooks/{webhook}/dead-letters/{seq}/replay.
func (a *WebhookAPI) ReplayDeadLetter(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	seq, err := strconv.ParseUint(chi.URLParam(r, "seq"), 10, 64)
	if err != nil || seq == 0 {
		WriteError(w, a.Log, apiErr(http.StatusNotFound, "dead_letter_not_found", "no dead letter with that sequence number"))
		return
	}
	dl, err := a.Service.Replay(r.Context(), def.Name, chi.URLParam(r, "webhook"), seq)
	if err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	writeJSON(w, http.StatusOK, dl)
}

// PurgeDeadLetters serves DELETE
// /v1/streams/{stream}/webhooks/{webhook}/dead-letters.
func (a *WebhookAPI) PurgeDeadLetters(w http.ResponseWriter, r *http.Request) {
	def, ok := a.webhookRoute(w, r)
	if !ok {
		return
	}
	if err := a.Service.PurgeDeadLetters(r.Context(), def.Name, chi.URLParam(r, "webhook")); err != nil {
		WriteError(w, a.Log, webhookError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
