package handlers

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/vstream-gateway/vstream-gateway/bridge"
	"github.com/vstream-gateway/vstream-gateway/reshard"
)

type reshardReport struct {
	// Type is "reshard" or "movetables" (DESIGN §4.1): a MoveTables
	// cutover moves Tables from Keyspace to TargetKeyspace.
	Type           string             `json:"type"`
	Keyspace       string             `json:"keyspace"`
	TargetKeyspace string             `json:"target_keyspace"`
	Tables         []string           `json:"tables,omitempty"`
	Journal        string             `json:"journal"`
	ID             string             `json:"id"`
	From           []string           `json:"from"`
	To             []string           `json:"to"`
	LocalPositions map[string]string  `json:"local_positions"`
	Targets        []reshard.ShardPos `json:"targets"`
	SeenAt         time.Time          `json:"seen_at"`
	Complete       bool               `json:"complete"`
	Bridges        []*bridge.Status   `json:"bridges"`
	Blocking       []blockingSub      `json:"blocking_subscribers"`
	SafeToComplete bool               `json:"safe_to_complete"`
}

type blockingSub struct {
	Stream     string `json:"stream"`
	Subscriber string `json:"subscriber"`
	Reason     string `json:"reason"`
}

// Reshards serves GET /v1/reshards: the journals seen (reshards and
// MoveTables cutovers), the bridges done or failed, and per cutover the
// named subscribers whose cursors still need the old shards (or the moved
// tables in their source keyspace) — the operator's "is it safe to run
// Reshard / MoveTables complete now?".
func (a *API) Reshards(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// MoveTables journals are recorded on the keyspace the tables left.
	keyspaces, err := a.servedKeyspaces(ctx)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	out := []reshardReport{}
	for _, ks := range keyspaces {
		reps, err := a.keyspaceReshards(ctx, ks)
		if err != nil {
			WriteError(w, a.Log, err)
			return
		}
		out = append(out, reps...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SeenAt.Before(out[j].SeenAt) })
	gaps, err := a.journalGaps(ctx)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reshards": out, "unrecorded": gaps})
}

func (a *API) keyspaceReshards(ctx context.Context, ks string) ([]reshardReport, error) {
	journals, err := a.Journals.List(ctx, ks)
	if err != nil {
		return nil, err
	}
	bridges, err := a.Bridges.Statuses(ctx, ks)
	if err != nil {
		return nil, err
	}
	defs, err := a.Streams.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []reshardReport
	for _, j := range journals {
		rep := reshardReport{
			Type: "reshard", Keyspace: ks, TargetKeyspace: j.Target(), Journal: j.Key, ID: formatID(j.ID), From: j.From(), To: j.To(),
			LocalPositions: j.Local, Targets: j.Targets, SeenAt: j.SeenAt, Complete: j.Complete(),
			Bridges: []*bridge.Status{}, Blocking: []blockingSub{},
		}
		if j.Moves() {
			rep.Type, rep.Tables = "movetables", j.Tables
		}
		safe := rep.Complete
		pinned := map[string]bool{} // stream/subscriber still needing the old shards
		for _, d := range defs {
			if !bridge.Crosses(d, j) {
				continue
			}
			subs, err := a.Cursors.List(ctx, d.Name)
			if err != nil {
				return nil, err
			}
			for _, s := range subs {
				if need, why := a.Bridges.NeedsOldShards(s, j); need {
					rep.Blocking = append(rep.Blocking, blockingSub{Stream: d.Name, Subscriber: s.Name, Reason: why})
					pinned[d.Name+"/"+s.Name] = true
					safe = false
				}
			}
		}
		for _, b := range bridges {
			if b.Journal != j.Key {
				continue
			}
			rep.Bridges = append(rep.Bridges, b)
		}
		// Safety is the subscribers' states, not the bridges': a running
		// bridge's subscriber is pinned until the bridge is in its state,
		// and a bridge left in_progress by a replica that died, or a
		// failed one, pins nothing once its subscriber read across the
		// cutover itself (or was deleted).
		rep.SafeToComplete = safe
		out = append(out, rep)
	}
	return out, nil
}

// formatID renders journal ids as strings: they are 64-bit hashes that
// JavaScript numbers cannot hold.
func formatID(id int64) string { return strconv.FormatInt(id, 10) }
