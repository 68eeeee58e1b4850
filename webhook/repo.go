package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// Store layout. Definitions are written by the admin API; status and the
// in-flight record only by the lease holder, with fenced writes.
const (
	nsWebhooks = "webhooks"         // id → Webhook
	nsStatus   = "webhook-status"   // id → Status
	nsInflight = "webhook-inflight" // id → inflight
)

func dlqLog(id string) string   { return "webhook-dlq/" + id }
func replayNS(id string) string { return "webhook-dlq-replays/" + id }

// repo persists webhooks.
type repo struct{ st store.Store }

func (r repo) get(ctx context.Context, id string) (*Webhook, error) {
	b, err := r.st.Get(ctx, nsWebhooks, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	w := &Webhook{}
	if err := json.Unmarshal(b, w); err != nil {
		return nil, fmt.Errorf("webhook %s: corrupt definition: %w", id, err)
	}
	return w, nil
}

func (r repo) put(ctx context.Context, w *Webhook) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return r.st.Put(ctx, nsWebhooks, w.ID, b)
}

func (r repo) create(ctx context.Context, w *Webhook) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	ok, err := r.st.PutIfAbsent(ctx, nsWebhooks, w.ID, b)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("webhook %s: id already taken", w.ID)
	}
	return nil
}

// list returns every webhook (of stream, when not empty), oldest first.
func (r repo) list(ctx context.Context, stream string) ([]*Webhook, error) {
	recs, err := r.st.List(ctx, nsWebhooks)
	if err != nil {
		return nil, err
	}
	out := make([]*Webhook, 0, len(recs))
	for _, rec := range recs {
		w := &Webhook{}
		if err := json.Unmarshal(rec.Value, w); err != nil {
			return nil, fmt.Errorf("webhook %s: corrupt definition: %w", rec.Key, err)
		}
		if stream == "" || w.Stream == stream {
			out = append(out, w)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// statuses returns every recorded status by webhook id.
func (r repo) statuses(ctx context.Context) (map[string]*Status, error) {
	recs, err := r.st.List(ctx, nsStatus)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Status, len(recs))
	for _, rec := range recs {
		s := &Status{}
		if err := json.Unmarshal(rec.Value, s); err == nil {
			out[rec.Key] = s
		}
	}
	return out, nil
}

func (r repo) status(ctx context.Context, id string) (*Status, error) {
	b, err := r.st.Get(ctx, nsStatus, id)
	if errors.Is(err, store.ErrNotFound) {
		return &Status{}, nil
	}
	if err != nil {
		return nil, err
	}
	s := &Status{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("webhook %s: corrupt status: %w", id, err)
	}
	return s, nil
}

// inflight is the batch being delivered, recorded before its first
// attempt so that a replica taking over after a crash re-sends the same
// transactions under the same webhook-id, and so that the API can show
// where a failing webhook stands.
type inflight struct {
	ID     string `json:"id"`
	Start  []byte `json:"start"` // protobuf VGtid; empty: stream start
	End    []byte `json:"end"`
	Events int    `json:"events"`
	// Body and Cursor are the batch as sent: a replica taking over re-sends
	// exactly it. Rebuilding it from the stream instead is not reliable on
	// several shards: another VStream may interleave the shards differently.
	Body           []byte    `json:"body,omitempty"`
	Cursor         string    `json:"cursor,omitempty"`
	Attempts       int       `json:"attempts"`
	FirstAttemptAt time.Time `json:"first_attempt_at,omitzero"`
	LastAttemptAt  time.Time `json:"last_attempt_at,omitzero"`
	LastStatus     int       `json:"last_status,omitempty"`
	LastError      string    `json:"last_error,omitempty"`
	NextAttemptAt  time.Time `json:"next_attempt_at,omitzero"`
}

func (r repo) inflight(ctx context.Context, id string) (*inflight, error) {
	b, err := r.st.Get(ctx, nsInflight, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := &inflight{}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, nil // unusable: the next batch overwrites it
	}
	return f, nil
}

// forget removes everything stored for webhook id except its definition.
func (r repo) forget(ctx context.Context, id string) error {
	errs := []error{
		r.st.Delete(ctx, nsStatus, id),
		r.st.Delete(ctx, nsInflight, id),
		r.st.DeleteLog(ctx, dlqLog(id)),
	}
	if recs, err := r.st.List(ctx, replayNS(id)); err == nil {
		for _, rec := range recs {
			errs = append(errs, r.st.Delete(ctx, replayNS(id), rec.Key))
		}
	} else {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
