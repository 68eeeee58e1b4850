package handlers

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

type subscriberView struct {
	Subscriber string            `json:"subscriber"`
	Cursor     string            `json:"cursor"`
	AckedAt    time.Time         `json:"acked_at"`
	Positions  map[string]string `json:"positions"` // shard → GTID set of the stored cursor
	Copying    bool              `json:"copying"`   // the cursor is inside a snapshot copy
	Bridges    int               `json:"bridges"`   // reshard spools still to replay
	// Lag per shard behind this replica's tail: null when it cannot be
	// told (no tail runs, or the cursor is older than its ring).
	Lag       map[string]lagView `json:"lag"`
	Connected int                `json:"connected"` // open connections on this replica (webhooks: 1 while a replica delivers it)
	LastSeen  *time.Time         `json:"last_seen,omitempty"`
	Webhook   bool               `json:"webhook"`
}

type lagView struct {
	Transactions int     `json:"transactions"`
	Seconds      float64 `json:"seconds"`
}

// ListSubscribers serves GET /v1/streams/{stream}/subscribers (admin): every
// named subscriber of the stream with its stored cursor decoded per shard,
// its lag behind the head, when it last acked and whether it is connected.
func (a *API) ListSubscribers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	def, err := a.stream(ctx, chi.URLParam(r, "stream"))
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	subs, err := a.Cursors.List(ctx, def.Name)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	var delivering map[string]bool
	if a.Webhooks != nil {
		if delivering, err = a.Webhooks(ctx, def.Name); err != nil {
			WriteError(w, a.Log, err)
			return
		}
	}
	out := make([]subscriberView, 0, len(subs))
	for _, s := range subs {
		tok, err := a.Hub.Token(ctx, def, s.VGtid)
		if err != nil {
			WriteError(w, a.Log, err)
			return
		}
		v := subscriberView{Subscriber: s.Name, Cursor: tok, AckedAt: s.AckedAt,
			Positions: shardPositions(s.VGtid), Bridges: len(s.Bridges), Webhook: strings.HasPrefix(s.Name, "webhook.")}
		for _, sg := range s.VGtid.GetShardGtids() {
			if len(sg.GetTablePKs()) > 0 || sg.GetGtid() == "" {
				v.Copying = true
			}
		}
		if lag, ok := a.Hub.Behind(def.Name, s.VGtid); ok && len(s.Bridges) == 0 {
			v.Lag = map[string]lagView{}
			for shard, l := range lag {
				v.Lag[shard] = lagView{Transactions: l.Transactions, Seconds: l.Seconds}
			}
		}
		if v.Webhook {
			if delivering[s.Name] {
				v.Connected = 1
			}
		} else {
			n, last := a.seen(def.Name, s.Name)
			v.Connected = n
			if !last.IsZero() {
				v.LastSeen = &last
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Subscriber < out[j].Subscriber })
	writeJSON(w, http.StatusOK, map[string]any{"subscribers": out})
}
