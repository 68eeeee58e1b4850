// Package reshard knows Vitess reshards (DESIGN §4): it records every
// reshard journal the gateway sees, watches each served keyspace for
// journals while no client is connected, and decides how a cursor whose
// shards are gone continues (rebuild.go). Carrying named subscribers
// across a cutover (bridging) is package bridge's.
package reshard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// Journal is one reshard cutover: the participants (old shards) stopped at
// their local positions and the targets (new shards) start at ShardGtids.
//
// Vitess identifies a journal by an id that is a hash of the target
// keyspace, shards and stream numbers; it comes back whenever the same
// reshard is done again (vitess-local.md trap 6), so the gateway's identity
// is Key: the id together with the participants and target positions.
type Journal struct {
	Key          string            `json:"key"`
	Keyspace     string            `json:"keyspace"`
	ID           int64             `json:"id"`
	Participants []string          `json:"participants"`
	Local        map[string]string `json:"local_positions"` // participant shard -> its local_position
	Targets      []ShardPos        `json:"targets"`
	Tables       []string          `json:"tables,omitempty"`
	SeenAt       time.Time         `json:"seen_at"`
	// Kind is KindTables for a MoveTables cutover (its targets are in
	// TargetKeyspace) and empty for a reshard.
	Kind           string `json:"kind,omitempty"`
	TargetKeyspace string `json:"target_keyspace,omitempty"`
	// Preexisting marks a MoveTables journal that was already on the
	// source primaries when the gateway first looked (moves.go): a cutover
	// from before any stream it serves, never followed.
	Preexisting bool `json:"preexisting,omitempty"`

	// from and to are the incarnations of the participants and the
	// targets (incarnation.go), set by Registry.List; nil elsewhere,
	// which stamps nothing.
	from, to map[string]string
}

// KindTables marks MoveTables journals (migration type TABLES).
const KindTables = "tables"

// Moves reports whether j is a MoveTables cutover.
func (j *Journal) Moves() bool { return j.Kind == KindTables }

// Target is the keyspace of the journal's target shards.
func (j *Journal) Target() string {
	if j.TargetKeyspace != "" {
		return j.TargetKeyspace
	}
	return j.Keyspace
}

// ShardPos is a shard and its position.
type ShardPos struct {
	Shard string `json:"shard"`
	Gtid  string `json:"gtid"`
}

// Complete reports whether every participant's local position is known.
// Each participant sends its own JOURNAL event; all are needed to decide
// whether a cursor is behind the cutover.
func (j *Journal) Complete() bool {
	for _, p := range j.Participants {
		if j.Local[p] == "" {
			return false
		}
	}
	return len(j.Participants) > 0
}

// LocalPosition is where the participants stopped: the position a cursor
// must cover for the journal to apply to it. Participants whose local
// position is not recorded yet are left out.
func (j *Journal) LocalPosition() position.Position {
	shards := make([]position.Shard, 0, len(j.Participants))
	for _, p := range j.Participants {
		if l := j.Local[p]; l != "" {
			shards = append(shards, j.LocalShard(p))
		}
	}
	return position.New(shards...)
}

// LocalShard is where participant p stopped, as an entry of the shard's
// incarnation at the cutover.
func (j *Journal) LocalShard(p string) position.Shard {
	return position.Shard{Keyspace: j.Keyspace, Shard: p, GTID: j.Local[p], Incarnation: j.from[p]}
}

// StampedLocal returns the participants' local positions as GTID texts
// with their incarnations, as positions hold them.
func (j *Journal) StampedLocal() map[string]string {
	out := make(map[string]string, len(j.Local))
	for p := range j.Local {
		out[p] = j.LocalShard(p).Text()
	}
	return out
}

// StampedTargets returns the targets' start positions as GTID texts with
// their incarnations.
func (j *Journal) StampedTargets() map[string]string {
	out := make(map[string]string, len(j.Targets))
	for _, t := range j.Targets {
		out[t.Shard] = position.Shard{GTID: t.Gtid, Incarnation: j.to[t.Shard]}.Text()
	}
	return out
}

// Apply crosses the cutover: pos with the participants replaced by the
// targets at their start positions.
func (j *Journal) Apply(pos position.Position) position.Position {
	targets := make([]position.Shard, len(j.Targets))
	for i, t := range j.Targets {
		targets[i] = position.Shard{Keyspace: j.Target(), Shard: t.Shard, GTID: t.Gtid, Incarnation: j.to[t.Shard]}
	}
	return pos.Replace(j.Keyspace, j.Participants, targets...)
}

// From lists the participant shards; To the target shards.
func (j *Journal) From() []string { return j.Participants }

// To lists the target shards.
func (j *Journal) To() []string {
	out := make([]string, len(j.Targets))
	for i, t := range j.Targets {
		out[i] = t.Shard
	}
	return out
}

func journalKey(keyspace string, id int64, participants []string, targets []ShardPos) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", keyspace, id, strings.Join(participants, ","))
	for _, t := range targets {
		fmt.Fprintf(h, "%s=%s\x00", t.Shard, t.Gtid)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// FromEvent converts a JOURNAL event from participant shard into a
// one-participant view of the journal. ok is false for journals that are not
// reshards (MoveTables journals are never sent by vtgate anyway).
func FromEvent(keyspace, shard string, j *binlogdatapb.Journal) (rec *Journal, ok bool) {
	if j == nil || j.MigrationType != binlogdatapb.MigrationType_SHARDS {
		return nil, false
	}
	rec = &Journal{Keyspace: keyspace, ID: j.Id, Local: map[string]string{}, Tables: j.Tables, SeenAt: time.Now().UTC()}
	for _, p := range j.Participants {
		if p.Keyspace == keyspace || p.Keyspace == "" {
			rec.Participants = append(rec.Participants, p.Shard)
		}
	}
	sort.Strings(rec.Participants)
	// A journal a reader hands on carries incarnations (source/
	// incarnation.go); the record, and so its key, holds what vtgate sent.
	for _, sg := range j.ShardGtids {
		rec.Targets = append(rec.Targets, ShardPos{Shard: sg.Shard, Gtid: position.Entry(keyspace, sg.Shard, sg.Gtid).GTID})
	}
	sort.Slice(rec.Targets, func(a, b int) bool { return rec.Targets[a].Shard < rec.Targets[b].Shard })
	rec.Key = journalKey(keyspace, j.Id, rec.Participants, rec.Targets)
	rec.Local[shard] = position.Entry(keyspace, shard, j.LocalPosition).GTID
	return rec, true
}

// Registry records journals in the store. Records never expire: a cursor
// saved before a reshard may come back months later.
type Registry struct {
	st store.Store

	// last is each keyspace's journal list as last read, for
	// Incarnations while the store does not answer.
	mu   sync.Mutex
	last map[string][]*Journal
}

// NewRegistry returns a journal registry over st.
func NewRegistry(st store.Store) *Registry { return &Registry{st: st, last: map[string][]*Journal{}} }

func journalNS(keyspace string) string { return "journals/" + keyspace }

// Record stores one participant's view of a journal. It reports whether
// this (journal, participant) pair is new. Records are immutable and keyed
// per participant, so concurrent recorders (every VStream of every replica
// may see the same JOURNAL) never overwrite each other.
func (r *Registry) Record(ctx context.Context, j *Journal) (bool, error) {
	var added bool
	for shard, pos := range j.Local {
		one := *j
		one.Local = map[string]string{shard: pos}
		b, err := json.Marshal(&one)
		if err != nil {
			return false, err
		}
		ok, err := r.st.PutIfAbsent(ctx, journalNS(j.Keyspace), j.Key+"/"+shard, b)
		if err != nil {
			return false, fmt.Errorf("record journal %d: %w", j.ID, err)
		}
		added = added || ok
	}
	return added, nil
}

// List returns the keyspace's journals, participants' records merged,
// oldest first, each knowing the incarnations of its shards
// (incarnation.go) — but a MoveTables journal's targets, which are
// another keyspace's (ListWithTargets).
func (r *Registry) List(ctx context.Context, keyspace string) ([]*Journal, error) {
	list, err := r.list(ctx, keyspace)
	if err != nil {
		return nil, err
	}
	annotate(list, nil)
	return list, nil
}

// ListWithTargets is List with the incarnations of MoveTables journals'
// targets too, read from their keyspaces' journals: what following a
// move needs (the Mover), and only it, so rebuilds on (re)connect read
// one keyspace's journals, not every keyspace's its moves went to.
func (r *Registry) ListWithTargets(ctx context.Context, keyspace string) ([]*Journal, error) {
	list, err := r.list(ctx, keyspace)
	if err != nil {
		return nil, err
	}
	targets := map[string][]*Journal{}
	for _, j := range list {
		if t := j.Target(); j.Moves() && targets[t] == nil {
			if targets[t], err = r.list(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	annotate(list, targets)
	return list, nil
}

func (r *Registry) list(ctx context.Context, keyspace string) ([]*Journal, error) {
	recs, err := r.st.List(ctx, journalNS(keyspace))
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Journal{}
	for _, rec := range recs {
		var j Journal
		if err := json.Unmarshal(rec.Value, &j); err != nil {
			return nil, fmt.Errorf("journal record %s: %w", rec.Key, err)
		}
		if have, ok := byKey[j.Key]; ok {
			for s, p := range j.Local {
				have.Local[s] = p
			}
			if j.SeenAt.Before(have.SeenAt) {
				have.SeenAt = j.SeenAt
			}
			continue
		}
		jj := j
		byKey[j.Key] = &jj
	}
	out := make([]*Journal, 0, len(byKey))
	for _, j := range byKey {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].SeenAt.Equal(out[b].SeenAt) {
			return out[a].SeenAt.Before(out[b].SeenAt)
		}
		return out[a].Key < out[b].Key
	})
	return out, nil
}

// Get returns one journal by key.
func (r *Registry) Get(ctx context.Context, keyspace, key string) (*Journal, error) {
	all, err := r.List(ctx, keyspace)
	if err != nil {
		return nil, err
	}
	for _, j := range all {
		if j.Key == key {
			return j, nil
		}
	}
	return nil, store.ErrNotFound
}
