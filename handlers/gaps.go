package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// servedKeyspaces lists the keyspaces whose journals the gateway records:
// those of the defined streams and the keyspaces their tables moved from.
func (a *API) servedKeyspaces(ctx context.Context) ([]string, error) {
	defs, err := a.Streams.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, d := range defs {
		seen[d.Keyspace] = true
		for _, m := range d.Moves {
			seen[m.From] = true
		}
	}
	out := make([]string, 0, len(seen))
	for ks := range seen {
		out = append(out, ks)
	}
	sort.Strings(out)
	return out, nil
}

// journalGaps lists the reshards whose journal the gateway missed for good
// (reshard.Gap), of every served keyspace, oldest first.
func (a *API) journalGaps(ctx context.Context) ([]*reshard.Gap, error) {
	kss, err := a.servedKeyspaces(ctx)
	if err != nil {
		return nil, err
	}
	out := []*reshard.Gap{}
	for _, ks := range kss {
		gaps, err := a.Journals.Gaps(ctx, ks)
		if err != nil {
			return nil, err
		}
		out = append(out, gaps...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FoundAt.Before(out[j].FoundAt) })
	return out, nil
}

// DismissGap serves DELETE /v1/reshards/gaps/{keyspace}/{id}: the operator
// has seen the gap (and dealt with the subscribers it affects); the
// gateway stops reporting itself degraded for it. Admin scope.
func (a *API) DismissGap(w http.ResponseWriter, r *http.Request) {
	ks, id := chi.URLParam(r, "keyspace"), chi.URLParam(r, "id")
	err := a.Journals.DismissGap(r.Context(), ks, id)
	if errors.Is(err, store.ErrNotFound) {
		err = apiErr(http.StatusNotFound, "gap_not_found", fmt.Sprintf("no unrecorded reshard %s in keyspace %s", quoteJSON(id), quoteJSON(ks)))
	}
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	a.Log.Info("unrecorded reshard dismissed", "keyspace", ks, "gap", id)
	w.WriteHeader(http.StatusNoContent)
}

// degraded says why the gateway serves but cannot promise exact resume to
// every subscriber, or "" when it can: a reshard whose journal it missed
// (DESIGN §4 rule 2). Readiness stays 200: the replica serves streams as
// well as any other, and taking it out of a load balancer would not bring
// the journal back.
func (a *API) degraded(ctx context.Context) string {
	if a.Journals == nil || a.Streams == nil {
		return ""
	}
	gaps, err := a.journalGaps(ctx)
	if err != nil || len(gaps) == 0 {
		return ""
	}
	return fmt.Sprintf("%d reshard(s) whose journal was missed: named subscribers behind them resume with their stream's on_gap; see GET /v1/reshards (unrecorded)", len(gaps))
}
