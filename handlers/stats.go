package handlers

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// statsTopologyWait bounds the question to vtgate about shards: the stats
// answer without them rather than wait on a vtgate that does not answer.
const statsTopologyWait = 2 * time.Second

type statsReport struct {
	At              time.Time `json:"at"`
	IntervalSeconds float64   `json:"interval_seconds"`
	Replica         string    `json:"replica,omitempty"` // the numbers are this replica's

	Admin       bool          `json:"admin"`
	Subject     string        `json:"subject,omitempty"`
	Streams     []streamStats `json:"streams"`
	ShardsError string        `json:"shards_error,omitempty"`
}

type streamStats struct {
	Name     string         `json:"name"`
	Keyspace string         `json:"keyspace"`
	Start    string         `json:"start"`
	Shards   []shardStats   `json:"shards"`
	Readers  map[string]int `json:"readers"`
	Webhooks *int           `json:"webhooks,omitempty"`
	// Admin only, this replica's: batches it has sent and not resolved,
	// and the recent history of each webhook of the stream it delivers.
	WebhooksInFlight *int                             `json:"webhooks_in_flight,omitempty"`
	WebhookHistory   map[string]metrics.WebhookSeries `json:"webhook_history,omitempty"`
	EventsInPerS     float64                          `json:"events_in_per_s"`
	EventsOutPerS    float64                          `json:"events_out_per_s"`
	EventsInTotal    float64                          `json:"events_in_total"`
	EventsOutTotal   map[string]float64               `json:"events_out_total"`
	Tail             *tailStats                       `json:"tail"`
	History          metrics.Series                   `json:"history"`
}

type shardStats struct {
	Shard string `json:"shard"`
	State string `json:"state"` // serving | readable (old shard, primary still up)
}

type tailStats struct {
	Position    map[string]string `json:"position"` // shard → GTID set; empty while starting
	RingEntries int               `json:"ring_entries"`
	RingBytes   int               `json:"ring_bytes"`
	MaxEntries  int               `json:"ring_max_entries"`
	MaxBytes    int               `json:"ring_max_bytes"`
	Followers   int               `json:"followers"`
	OldestAt    *time.Time        `json:"oldest_at,omitempty"`
	HeadCommit  *time.Time        `json:"head_commit,omitempty"`
}

// Stats serves GET /v1/stats: every stream the token may read, with this
// replica's readers by transport, events per second in and out, its tail's
// position and ring fill, and the last minutes of history for the console's
// charts. The numbers are read from the metrics' own collectors and the
// hub, not from /metrics text (DESIGN §13).
func (a *API) Stats(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	defs, err := a.Streams.List(ctx)
	if err != nil {
		WriteError(w, a.Log, err)
		return
	}
	defs = visibleStreams(ctx, defs)
	p := auth.FromContext(ctx)
	admin := p == nil || p.Admin()
	if !admin {
		defs = wholeStreams(p, defs)
	}
	rep := statsReport{At: time.Now().UTC(), Admin: admin, Streams: []streamStats{}}
	if p != nil {
		rep.Subject = p.Subject
	}
	if admin {
		rep.Replica = a.Replica // host and pid: for operators only
	}
	rep.IntervalSeconds = a.History.Interval().Seconds()
	var keyspaces []string
	for _, d := range defs {
		keyspaces = append(keyspaces, d.Keyspace)
	}
	var topo *source.Topology
	if a.Topology != nil && len(keyspaces) > 0 {
		tctx, cancel := context.WithTimeout(ctx, statsTopologyWait)
		t, err := a.Topology(tctx, keyspaces...)
		cancel()
		if err != nil {
			rep.ShardsError = err.Error()
		} else {
			topo = &t
		}
	}
	live := metrics.Live()
	for _, d := range defs {
		s := streamStats{Name: d.Name, Keyspace: d.Keyspace, Start: d.Start, Shards: []shardStats{},
			Readers:        map[string]int{metrics.TransportWS: 0, metrics.TransportSSE: 0, metrics.TransportPull: 0},
			EventsOutTotal: map[string]float64{}}
		if topo != nil {
			s.Shards = shardsOf(*topo, d.Keyspace)
		}
		if l := live[d.Name]; l != nil {
			for t, n := range l.Readers {
				s.Readers[t] = n
			}
			s.EventsInTotal, s.EventsOutTotal = l.EventsIn, l.EventsOut
		}
		if admin && a.Webhooks != nil {
			if whs, err := a.Webhooks(ctx, d.Name); err == nil {
				n, f := len(whs), a.History.WebhooksInFlight(d.Name)
				s.Webhooks, s.WebhooksInFlight = &n, &f
				s.WebhookHistory = a.History.Webhooks(d.Name)
			}
		}
		s.EventsInPerS, s.EventsOutPerS = a.History.Rates(d.Name)
		s.History = a.History.Series(d.Name)
		if ts, ok := a.Hub.TailStatus(d.Name); ok {
			t := &tailStats{Position: shardPositions(ts.Position), RingEntries: ts.Entries, RingBytes: ts.Bytes,
				MaxEntries: ts.MaxEntries, MaxBytes: ts.MaxBytes, Followers: ts.Followers}
			if !ts.OldestAt.IsZero() {
				t.OldestAt = &ts.OldestAt
			}
			if !ts.HeadCommit.IsZero() {
				t.HeadCommit = &ts.HeadCommit
			}
			s.Tail = t
		}
		rep.Streams = append(rep.Streams, s)
	}
	writeJSON(w, http.StatusOK, rep)
}

// wholeStreams keeps the streams p's tables claim covers whole. A stream's
// numbers — events read from vtgate, its tail's position and ring, their
// history — are the whole stream's and cannot be split by table: shown to
// a token that reads only some of its tables, they would tell the volume
// of the others. So a token sees the stats of the streams it reads all of
// (for a stream with a /regex/ rule, whose tables cannot be listed: every
// table of its keyspace); the admin scope, which manages every stream,
// sees them all.
func wholeStreams(p *auth.Principal, list []*streams.Definition) []*streams.Definition {
	f := p.TableFilter()
	out := make([]*streams.Definition, 0, len(list))
	for _, d := range list {
		names := d.TableNames()
		whole := len(names) == len(d.Tables)+len(d.Rules) || f.AllowsKeyspace(d.Keyspace)
		for _, t := range names {
			whole = whole && f.Allows(d.Keyspace, t)
		}
		if whole {
			out = append(out, d)
		}
	}
	return out
}

// shardsOf lists keyspace's shards in vtgate's view, in key order.
func shardsOf(t source.Topology, keyspace string) []shardStats {
	out := []shardStats{}
	for k, st := range t.Shards {
		ks, shard, _ := strings.Cut(k, "/")
		if ks != keyspace {
			continue
		}
		state := "serving"
		if st == source.ShardReadable {
			state = "readable"
		}
		out = append(out, shardStats{Shard: shard, State: state})
	}
	sort.Slice(out, func(i, j int) bool { return shardLess(out[i].Shard, out[j].Shard) })
	return out
}

// shardLess orders shard names by key range: "-80" before "80-", "0" alone.
func shardLess(a, b string) bool {
	if strings.HasPrefix(a, "-") != strings.HasPrefix(b, "-") {
		return strings.HasPrefix(a, "-")
	}
	return a < b
}

// shardPositions renders a position as shard → GTID set (the copy phase's
// table positions are left out: a position, not a resume point, is shown).
func shardPositions(v *binlogdatapb.VGtid) map[string]string {
	out := map[string]string{}
	for _, s := range position.Of(v).Shards() {
		out[s.Shard] = s.GTID
	}
	return out
}
