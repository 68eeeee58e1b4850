package reshard

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"vitess.io/vitess/go/mysql/replication"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

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
	if allState(cur, topo, source.ShardServing) {
		return Decision{Outcome: Passthrough, VGtid: cur}
	}
	pos := proto.Clone(cur).(*binlogdatapb.VGtid)
	var applied []*Journal
	for {
		j := nextJournal(pos, topo, journals)
		if j == nil {
			break
		}
		pos = Apply(pos, j)
		applied = append(applied, j)
	}
	var missing []string
	for _, sg := range pos.ShardGtids {
		if topo.State(sg.Keyspace, sg.Shard) == source.ShardGone && sg.Shard != "" {
			missing = append(missing, sg.Keyspace+"/"+sg.Shard)
		}
	}
	switch {
	case len(missing) > 0:
		sort.Strings(missing)
		return Decision{Outcome: Resync, Missing: missing, Applied: applied}
	case len(applied) > 0:
		return Decision{Outcome: Exact, VGtid: pos, Applied: applied}
	default:
		return Decision{Outcome: Passthrough, VGtid: cur}
	}
}

func allState(v *binlogdatapb.VGtid, topo source.Topology, want source.ShardState) bool {
	for _, sg := range v.GetShardGtids() {
		if sg.Shard != "" && topo.State(sg.Keyspace, sg.Shard) != want {
			return false
		}
	}
	return true
}

// nextJournal finds a journal that applies to pos: all its participants are
// in pos, at least one of them is not serving, and pos holds each
// participant at or past its local position. Among several (a journal id
// can repeat), the one with the highest local positions wins: it is the
// latest cutover the cursor has passed.
func nextJournal(pos *binlogdatapb.VGtid, topo source.Topology, journals map[string][]*Journal) *Journal {
	shards := map[string]*binlogdatapb.ShardGtid{}
	for _, sg := range pos.ShardGtids {
		shards[sg.Keyspace+"/"+sg.Shard] = sg
	}
	var best *Journal
	for ks, list := range journals {
	next:
		for _, j := range list {
			if !j.Complete() {
				continue
			}
			notServing := false
			for _, p := range j.Participants {
				sg, ok := shards[ks+"/"+p]
				if !ok || len(sg.TablePKs) > 0 {
					continue next
				}
				if !AtLeast(sg.Gtid, j.Local[p]) {
					continue next
				}
				if topo.State(ks, p) != source.ShardServing {
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
	for _, p := range a.Participants {
		if !AtLeast(a.Local[p], b.Local[p]) {
			return false
		}
	}
	return true
}

// Apply replaces j's participants in pos by its targets.
func Apply(pos *binlogdatapb.VGtid, j *Journal) *binlogdatapb.VGtid {
	part := map[string]bool{}
	for _, p := range j.Participants {
		part[p] = true
	}
	out := &binlogdatapb.VGtid{}
	for _, sg := range pos.ShardGtids {
		if sg.Keyspace == j.Keyspace && part[sg.Shard] {
			continue
		}
		out.ShardGtids = append(out.ShardGtids, sg)
	}
	for _, t := range j.Targets {
		out.ShardGtids = append(out.ShardGtids, &binlogdatapb.ShardGtid{Keyspace: j.Keyspace, Shard: t.Shard, Gtid: t.Gtid})
	}
	return out
}

// AtLeast reports whether GTID position a is at or past b. Positions are
// compared with Vitess's replication package (per GTID domain), never as
// text; anything unparsable is "not at least".
func AtLeast(a, b string) bool {
	pa, err := replication.DecodePosition(a)
	if err != nil || pa.IsZero() {
		return false
	}
	pb, err := replication.DecodePosition(b)
	if err != nil {
		return false
	}
	return pa.AtLeast(pb)
}

// Behind reports whether a named cursor must be bridged across j: it holds
// every participant and is strictly behind the cutover on at least one.
func Behind(cur *binlogdatapb.VGtid, j *Journal) bool {
	shards := map[string]*binlogdatapb.ShardGtid{}
	for _, sg := range cur.GetShardGtids() {
		shards[sg.Keyspace+"/"+sg.Shard] = sg
	}
	behind := false
	for _, p := range j.Participants {
		sg, ok := shards[j.Keyspace+"/"+p]
		if !ok {
			return false
		}
		if len(sg.TablePKs) > 0 || sg.Gtid == "" {
			return true // mid-copy on the old shard: only the old shard can finish it
		}
		if !AtLeast(sg.Gtid, j.Local[p]) {
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

// AllServing reports whether every shard of pos serves (the common case,
// decided without loading journals).
func AllServing(pos *binlogdatapb.VGtid, topo source.Topology) bool {
	return allState(pos, topo, source.ShardServing)
}
