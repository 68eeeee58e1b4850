package reshard

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Gap is a reshard the gateway knows happened but could not record: the
// journal watcher's saved position names shards that are gone, and no
// recorded journal continues it (DESIGN §4 rule 2). The cutover's journal
// lived on the deleted shards, so nothing can be bridged across it any
// more: a named subscriber behind it resumes with its stream's on_gap.
// Gaps are kept until an operator dismisses them; while one is kept the
// gateway reports itself degraded (GET /readyz).
type Gap struct {
	ID       string    `json:"id"`
	Keyspace string    `json:"keyspace"`
	Missing  []string  `json:"missing"`           // the saved position's shards that are gone
	From     string    `json:"from"`              // the saved position
	Serving  []string  `json:"serving"`           // the keyspace's shards when the gap was found
	FoundAt  time.Time `json:"found_at"`          // when the watcher found it
	Holder   string    `json:"holder,omitempty"`  // the replica whose watcher found it
	Message  string    `json:"message,omitempty"` // what it means, for the operator
}

func gapNS(keyspace string) string { return "journal-gaps/" + keyspace }

// RecordGap stores g (its ID made from its time and shards when empty).
func (r *Registry) RecordGap(ctx context.Context, g *Gap) error {
	if g.ID == "" {
		g.ID = fmt.Sprintf("%d-%s", g.FoundAt.UnixNano(), strings.Join(g.Missing, "+"))
		g.ID = strings.NewReplacer("/", "_", " ", "").Replace(g.ID)
	}
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := r.st.Put(ctx, gapNS(g.Keyspace), g.ID, b); err != nil {
		return fmt.Errorf("record journal gap: %w", err)
	}
	return nil
}

// Gaps lists the keyspace's recorded gaps, oldest first.
func (r *Registry) Gaps(ctx context.Context, keyspace string) ([]*Gap, error) {
	recs, err := r.st.List(ctx, gapNS(keyspace))
	if err != nil {
		return nil, err
	}
	out := make([]*Gap, 0, len(recs))
	for _, rec := range recs {
		var g Gap
		if err := json.Unmarshal(rec.Value, &g); err != nil {
			return nil, fmt.Errorf("journal gap %s: %w", rec.Key, err)
		}
		out = append(out, &g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].FoundAt.Before(out[b].FoundAt) })
	return out, nil
}

// DismissGap forgets a gap (store.ErrNotFound if there is none by that id).
func (r *Registry) DismissGap(ctx context.Context, keyspace, id string) error {
	if _, err := r.st.Get(ctx, gapNS(keyspace), id); err != nil {
		return err
	}
	return r.st.Delete(ctx, gapNS(keyspace), id)
}
