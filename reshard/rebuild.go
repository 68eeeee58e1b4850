package reshard

import (
	"fmt"
	"sort"
	"strings"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// Outcome is how a cursor was rebuilt on (re)connect. Every outcome is
// logged and counted.
type Outcome string

// Outcomes.
const (
	// Passthrough: vtgate can resume the cursor as it is (all shards exist,
	// possibly non-serving old shards that vtgate walks to their journal).
	Passthrough Outcome = "passthrough"
	// Exact: shards were gone and recorded journals rewrote the cursor to
	// the new shards with nothing lost or repeated.
	Exact Outcome = "exact"
	// Bridged: a named subscriber resumed from its bridge spool.
	Bridged Outcome = "bridged"
	// Resync: exact resume was impossible; the client gets a resync event
	// and a fresh snapshot.
	Resync Outcome = "resync"
	// Failed: exact resume was impossible and the stream's on_gap is fail.
	Failed Outcome = "failed"
)

// Decision is the result of Decide.
type Decision struct {
	Outcome Outcome
	// VGtid is where to open the VStream (Passthrough, Exact).
	VGtid *binlogdatapb.VGtid
	// Applied lists the journals an exact rewrite followed, in order.
	Applied []*Journal
	// Missing names the shards ("keyspace/shard") that made exact resume
	// impossible.
	Missing []string
	// From is the cursor decided on, for the log.
	From *binlogdatapb.VGtid
}

// Decide rebuilds cur against the topology and the recorded journals of
// its keyspaces (DESIGN §4 rule 4):
//
//   - every shard serving → passthrough;
//   - shards not serving → follow journals (chains and merges): a journal
//     applies when the cursor holds every participant at or past the
//     participant's local_position; the participants are replaced by the
//     journal's target positions — exact;
//   - shards still not serving but readable (old shard, tablet running) →
//     passthrough, vtgate walks them to the journal;
//   - anything left gone → a gap: the caller applies the stream's on_gap.
func Decide(cur *binlogdatapb.VGtid, topo source.Topology, journals map[string][]*Journal) Decision {
	d := decide(cur, topo, journals)
	d.From = cur
	return d
}

func decide(cur *binlogdatapb.VGtid, topo source.Topology, journals map[string][]*Journal) Decision {
	if AllServing(cur, topo, journals) {
		return Decision{Outcome: Passthrough, VGtid: cur}
	}
	pos := position.Of(cur)
	var applied []*Journal
	for {
		j := nextJournal(pos, topo, journals)
		if j == nil {
			break
		}
		pos = j.Apply(pos)
		applied = append(applied, j)
	}
	var missing []string
	for _, s := range pos.Shards() {
		if s.Shard != "" && liveState(s, topo, journals) == source.ShardGone {
			missing = append(missing, s.Key())
		}
	}
	switch {
	case len(missing) > 0:
		sort.Strings(missing)
		return Decision{Outcome: Resync, Missing: missing, Applied: applied}
	case len(applied) > 0:
		return Decision{Outcome: Exact, VGtid: pos.VGtid(), Applied: applied}
	default:
		return Decision{Outcome: Passthrough, VGtid: cur}
	}
}

// nextJournal finds a journal that applies to pos: all its participants are
// in pos, at least one of them is not serving, and pos holds each
// participant at or past its local position. Among several (a journal id
// can repeat), the one with the highest local positions wins: it is the
// latest cutover the cursor has passed.
func nextJournal(pos position.Position, topo source.Topology, journals map[string][]*Journal) *Journal {
	var best *Journal
	for ks, list := range journals {
		for _, j := range list {
			// MoveTables cutovers are followed by the hub (upstream/move.go):
			// the source shards keep serving, so no rebuild is needed.
			if j.Moves() || !j.Complete() || !pos.Covers(j.LocalPosition()) {
				continue
			}
			notServing := false
			for _, p := range j.Participants {
				if s, ok := pos.Lookup(ks, p); ok && liveState(s, topo, journals) != source.ShardServing {
					notServing = true
				}
			}
			if !notServing {
				continue
			}
			if best == nil || laterThan(j, best) {
				best = j
			}
		}
	}
	return best
}

// laterThan orders two journals with the same participants by their local
// positions.
func laterThan(a, b *Journal) bool {
	if strings.Join(a.Participants, ",") != strings.Join(b.Participants, ",") {
		return a.SeenAt.After(b.SeenAt)
	}
	return a.LocalPosition().Covers(b.LocalPosition())
}

// BehindCutover reports whether a named cursor must be bridged across j:
// it holds every participant and is strictly behind the cutover on at
// least one (or cannot tell: its position there is not ordered with the
// journal's). A participant mid-copy counts as behind: only the old shard
// can finish its copy.
func BehindCutover(cur *binlogdatapb.VGtid, j *Journal) bool {
	pos := position.Of(cur)
	behind := false
	for _, p := range j.Participants {
		s, ok := pos.Lookup(j.Keyspace, p)
		switch {
		case !ok:
			return false
		case s.Copying():
			return true
		case j.Local[p] == "":
			// Not recorded yet (the journal is incomplete): nothing to be
			// behind of on this participant.
		case !s.Covers(j.LocalShard(p)):
			behind = true
		}
	}
	return behind
}

// GapError says exact resume is impossible (on_gap=fail).
type GapError struct {
	Missing []string
}

func (e *GapError) Error() string {
	return fmt.Sprintf("cursor needs shards that no longer exist (%s) and no recorded reshard journal continues it exactly; resume from a fresh snapshot",
		strings.Join(e.Missing, ", "))
}

// AllServing reports whether every shard of pos serves, each in the
// incarnation pos has of it (the common case: vtgate resumes pos as it is).
func AllServing(pos *binlogdatapb.VGtid, topo source.Topology, journals map[string][]*Journal) bool {
	for _, s := range position.Of(pos).Shards() {
		if s.Shard != "" && liveState(s, topo, journals) != source.ShardServing {
			return false
		}
	}
	return true
}
