package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// journalRecorder records every JOURNAL any VStream of this process sees
// (DESIGN §4 rule 1).
func journalRecorder(reg *reshard.Registry, s *Server) source.JournalHook {
	return func(ctx context.Context, keyspace, shard string, j *binlogdatapb.Journal) {
		rec, ok := reshard.FromEvent(keyspace, shard, j)
		if !ok {
			return
		}
		added, err := reg.Record(context.WithoutCancel(ctx), rec)
		if err != nil {
			s.log.Error("recording a reshard journal failed", "keyspace", keyspace, "journal", rec.Key, "err", err)
			return
		}
		if added {
			s.log.Info("reshard journal recorded", "keyspace", keyspace, "participant", shard,
				"journal", rec.Key, "id", rec.ID, "from", rec.From(), "to", rec.To(), "local_position", j.LocalPosition)
		}
	}
}

// incarnations tells readers the incarnation of the shards they read
// without a position naming them (DESIGN §4 rule 6): the recorded
// journals and vtgate's view of the primaries decide.
func incarnations(reg *reshard.Registry, s *Server) source.Incarnations {
	return func(ctx context.Context, keyspace string) (func(string) string, error) {
		topo, err := s.src.Topology(ctx, keyspace)
		if err != nil {
			return nil, err
		}
		return reg.Incarnations(ctx, topo, keyspace)
	}
}

// rideTail lends the journal watcher a running stream tail (DESIGN §4
// rule 2).
func (s *Server) rideTail(keyspace string, from *binlogdatapb.VGtid) (reshard.WatchFeed, string, bool) {
	r, ok := s.hub.RideTail(keyspace, from)
	if !ok {
		return nil, "", false
	}
	return r, r.Stream, true
}

// servedKeyspaces lists the keyspaces of the defined streams.
func servedKeyspaces(reg *streams.Registry) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		defs, err := reg.List(ctx)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		var out []string
		for _, d := range defs {
			if !seen[d.Keyspace] {
				seen[d.Keyspace] = true
				out = append(out, d.Keyspace)
			}
		}
		return out, nil
	}
}

// replicaID names this process in leases.
func replicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// observeRebuild logs and counts every cursor rebuild outcome.
func (s *Server) observeRebuild(_ string, outcome reshard.Outcome) {
	metrics.CursorRebuild(string(outcome))
}
