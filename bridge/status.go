package bridge

import (
	"context"
	"encoding/json"
	"time"
)

// Status is the record of one bridge, for GET /v1/reshards.
type Status struct {
	Journal    string    `json:"journal"`
	Stream     string    `json:"stream"`
	Subscriber string    `json:"subscriber"`
	State      string    `json:"state"` // in_progress | done | failed | not_needed
	Events     int       `json:"events"`
	Bytes      int       `json:"bytes"`
	Error      string    `json:"error,omitempty"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished,omitzero"`
}

// statusNS is where the statuses of keyspace's bridges are kept. Statuses
// are kept by the journal's keyspace: a stream whose tables moved reads
// another keyspace now (DESIGN §4.1).
func statusNS(keyspace string) string { return "bridges/" + keyspace }

func statusKey(s *Status) string { return s.Journal + "/" + s.Stream + "/" + s.Subscriber }

func (b *Bridger) saveStatus(ctx context.Context, keyspace string, s *Status) {
	raw, _ := json.Marshal(s)
	key := statusKey(s)
	if err := b.st.Put(context.WithoutCancel(ctx), statusNS(keyspace), key, raw); err != nil {
		b.log.Warn("saving bridge status failed", "key", key, "err", err)
	}
}

// settleStale records s in place of an in_progress status left by a
// replica that died mid-bridge (the journal watcher's next holder bridges
// again, DESIGN §4 rule 3): /v1/reshards would show it running forever.
// A subscriber that needs no bridge and has no status gets none (most
// subscribers of a stream read across a cutover themselves).
func (b *Bridger) settleStale(ctx context.Context, keyspace string, s *Status) {
	raw, err := b.st.Get(ctx, statusNS(keyspace), statusKey(s))
	if err != nil {
		return
	}
	var old Status
	if json.Unmarshal(raw, &old) != nil || old.State != "in_progress" {
		return
	}
	s.Started, s.Finished = old.Started, time.Now().UTC()
	b.saveStatus(ctx, keyspace, s)
}

// Statuses lists the bridges recorded for keyspace.
func (b *Bridger) Statuses(ctx context.Context, keyspace string) ([]*Status, error) {
	recs, err := b.st.List(ctx, statusNS(keyspace))
	if err != nil {
		return nil, err
	}
	out := make([]*Status, 0, len(recs))
	for _, r := range recs {
		var s Status
		if json.Unmarshal(r.Value, &s) == nil {
			out = append(out, &s)
		}
	}
	return out, nil
}
