package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// decodeBody reads a JSON body strictly: unknown fields, trailing data and
// oversize bodies are client errors.
func (a *API) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, a.AdminConfig.MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiErr(http.StatusRequestEntityTooLarge, "body_too_large", "request body is larger than the limit")
		}
		if errors.Is(err, io.EOF) {
			return apiErr(http.StatusBadRequest, "invalid_body", "request body is empty")
		}
		return apiErr(http.StatusBadRequest, "invalid_body", "request body is not valid JSON for this endpoint: "+err.Error())
	}
	if dec.More() {
		return apiErr(http.StatusBadRequest, "invalid_body", "request body has data after the JSON value")
	}
	return nil
}

// CreateStream serves POST /v1/streams.
func (a *API) CreateStream(w http.ResponseWriter, r *http.Request) {
	var d streams.Definition
	if err := a.decodeBody(w, r, &d); err != nil {
		WriteError(w, a.Log, err)
		return
	}
	// Set by the gateway only: when it was created, and the MoveTables
	// cutovers it followed (a client's moves would send readers to
	// another keyspace's positions).
	d.CreatedAt, d.Moves = time.Time{}, nil
	err := a.Streams.Create(r.Context(), &d)
	var (
		ve *streams.ValidationError
		ue *source.UpstreamError
	)
	switch {
	case errors.As(err, &ve):
		WriteError(w, a.Log, apiErr(http.StatusBadRequest, "invalid_stream", ve.Error()))
	case errors.As(err, &ue):
		WriteError(w, a.Log, upstreamError(ue))
	case errors.Is(err, streams.ErrExists):
		WriteError(w, a.Log, apiErr(http.StatusConflict, "stream_exists", "a stream named "+quoteJSON(d.Name)+" already exists"))
	case err != nil:
		WriteError(w, a.Log, err)
	default:
		a.Log.Info("stream created", "stream", d.Name, "keyspace", d.Keyspace)
		writeJSON(w, http.StatusCreated, &d)
	}
}

// ListStreams serves GET /v1/streams.
func (a *API) ListStreams(w http.ResponseWriter, r *http.Request) {
	list, err := a.Streams.List(r.Context())
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	list = visibleStreams(r.Context(), list)
	writeJSON(w, http.StatusOK, map[string]any{"streams": list})
}

// GetStream serves GET /v1/streams/{stream}.
func (a *API) GetStream(w http.ResponseWriter, r *http.Request) {
	d, err := a.stream(r.Context(), chi.URLParam(r, "stream"))
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// DeleteStream serves DELETE /v1/streams/{stream}.
func (a *API) DeleteStream(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "stream")
	err := a.Streams.Delete(r.Context(), name)
	if errors.Is(err, streams.ErrNotFound) {
		WriteError(w, a.Log, apiErr(http.StatusNotFound, "stream_not_found", "no stream named "+quoteJSON(name)))
		return
	}
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	if a.StreamDeleted != nil {
		if err := a.StreamDeleted(r.Context(), name); err != nil {
			a.Log.Warn("deleting the webhooks of a deleted stream failed", "stream", name, "err", err)
		}
	}
	// Cursors of a deleted stream must not be resumed by a new stream that
	// reuses the name.
	if err := a.Cursors.DeleteAll(r.Context(), name); err != nil {
		a.Log.Warn("deleting the subscribers of a deleted stream failed", "stream", name, "err", err)
	}
	a.Log.Info("stream deleted", "stream", name)
	w.WriteHeader(http.StatusNoContent)
}

type ackRequest struct {
	Cursor string `json:"cursor"`
}

// Ack serves POST /v1/streams/{stream}/subscribers/{subscriber}/ack: the
// subscriber confirms it processed everything up to cursor.
func (a *API) Ack(w http.ResponseWriter, r *http.Request) {
	def, sub, ok := a.subscriberPath(w, r)
	if !ok {
		return
	}
	var req ackRequest
	if err := a.decodeBody(w, r, &req); err != nil {
		WriteError(w, a.Log, err)
		return
	}
	if req.Cursor == "" {
		WriteError(w, a.Log, apiErr(http.StatusBadRequest, "invalid_cursor", "cursor is required"))
		return
	}
	tok, err := a.ack(r, def, sub, req.Cursor)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"subscriber": sub, "cursor": tok})
}

// ack stores token as sub's cursor and returns the token now stored (an
// older ack leaves a newer cursor in place).
func (a *API) ack(r *http.Request, def *streams.Definition, sub, token string) (string, error) {
	return a.ackCtx(r.Context(), def, sub, token)
}

func (a *API) ackCtx(ctx context.Context, def *streams.Definition, sub, token string) (string, error) {
	v, err := a.Hub.Position(ctx, def, token)
	if errors.Is(err, store.ErrUnavailable) {
		return "", err // a reference token whose position is in the store
	}
	if err != nil {
		return "", apiErr(http.StatusBadRequest, "invalid_cursor", err.Error())
	}
	found, err := a.checkScope(ctx, def, sub)
	if err != nil {
		return "", err
	}
	stored, err := a.Cursors.Ack(ctx, def.Name, sub, v)
	if err != nil {
		return "", err
	}
	if !found {
		// The ack created the subscriber: it is bound to this scope.
		if _, err := a.checkScope(ctx, def, sub); err != nil {
			return "", err
		}
	}
	if stored == v {
		metrics.CursorWrite(def.Name)
		return token, nil
	}
	return a.Hub.Token(ctx, def, stored)
}

// GetSubscriber serves GET /v1/streams/{stream}/subscribers/{subscriber}.
func (a *API) GetSubscriber(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	def, sub, ok := a.subscriberPath(w, r)
	if !ok {
		return
	}
	st, err := a.Cursors.Get(ctx, def.Name, sub)
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, a.Log, apiErr(http.StatusNotFound, "subscriber_not_found", "no subscriber named "+quoteJSON(sub)))
		return
	}
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	tok, err := a.Hub.Token(ctx, def, st.VGtid)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"subscriber": sub, "cursor": tok, "acked_at": st.AckedAt})
}

// DeleteSubscriber serves DELETE /v1/streams/{stream}/subscribers/{subscriber}.
func (a *API) DeleteSubscriber(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	def, err := a.stream(ctx, chi.URLParam(r, "stream"))
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	if err := a.Cursors.Delete(ctx, def.Name, chi.URLParam(r, "subscriber")); err != nil {
		WriteError(w, a.Log, err)
		return
	}
	a.forgetPresence(def.Name, chi.URLParam(r, "subscriber"))
	w.WriteHeader(http.StatusNoContent)
}

// Healthz serves GET /healthz: the process is alive.
func (a *API) Healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Readyz serves GET /readyz: vtgate and the store answer (503 when one
// does not); "degraded" (still 200) while a reshard the gateway could not
// record is kept (gaps.go).
func (a *API) Readyz(w http.ResponseWriter, r *http.Request) {
	if a.Ready != nil {
		if err := a.Ready(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": err.Error()})
			return
		}
	}
	if why := a.degraded(r.Context()); why != "" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "degraded", "reason": why})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
