package reshard

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

func pos(seq int) string { return fmt.Sprintf("MariaDB/0-1-%d", seq) }

func vg(kv ...any) *binlogdatapb.VGtid {
	v := &binlogdatapb.VGtid{}
	for i := 0; i < len(kv); i += 2 {
		v.ShardGtids = append(v.ShardGtids, &binlogdatapb.ShardGtid{Keyspace: "customer", Shard: kv[i].(string), Gtid: pos(kv[i+1].(int))})
	}
	return v
}

// topo is a topology with the shards in states. A readable shard's
// primary began its term long before any journal was seen, unless the
// shard is in fresh: then after them all (a new shard of a reused name).
func topo(states map[string]source.ShardState, fresh ...string) source.Topology {
	t := source.Topology{Shards: map[string]source.ShardState{}, Keyspaces: map[string]bool{"customer": true}, Terms: map[string]time.Time{}}
	for s, st := range states {
		t.Shards["customer/"+s] = st
		if st == source.ShardReadable {
			t.Terms["customer/"+s] = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
			if slices.Contains(fresh, s) {
				t.Terms["customer/"+s] = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
			}
		}
	}
	return t
}

var seen = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func journal(id int64, local map[string]int, targets map[string]int) *Journal {
	j := &Journal{Keyspace: "customer", ID: id, Local: map[string]string{}, SeenAt: seen}
	seen = seen.Add(time.Minute)
	for p, l := range local {
		j.Participants = append(j.Participants, p)
		j.Local[p] = pos(l)
	}
	sort.Strings(j.Participants)
	for s, g := range targets {
		j.Targets = append(j.Targets, ShardPos{Shard: s, Gtid: pos(g)})
	}
	sort.Slice(j.Targets, func(a, b int) bool { return j.Targets[a].Shard < j.Targets[b].Shard })
	j.Key = journalKey("customer", id, j.Participants, j.Targets)
	return j
}

// inc returns v with shard's entry of the given incarnation.
func inc(v *binlogdatapb.VGtid, shard, incarnation string) *binlogdatapb.VGtid {
	p := position.Of(v)
	s, _ := p.Lookup("customer", shard)
	return p.WithShard(s.WithIncarnation(incarnation)).VGtid()
}

func shardsOf(v *binlogdatapb.VGtid) map[string]string {
	out := map[string]string{}
	for _, sg := range v.GetShardGtids() {
		out[sg.Shard] = sg.Gtid
	}
	return out
}

const (
	gone     = source.ShardGone
	serving  = source.ShardServing
	readable = source.ShardReadable
)

func TestDecide(t *testing.T) {
	split := journal(7, map[string]int{"0": 100}, map[string]int{"-80": 5, "80-": 6})
	split4a := journal(8, map[string]int{"-80": 5}, map[string]int{"-40": 3, "40-80": 4})
	split4b := journal(9, map[string]int{"80-": 6}, map[string]int{"80-c0": 7, "c0-": 8})
	merge := journal(10, map[string]int{"-80": 70, "80-": 80}, map[string]int{"0": 1})
	again := journal(7, map[string]int{"0": 400}, map[string]int{"-80": 55, "80-": 66})
	incomplete := &Journal{Keyspace: "customer", ID: 11, Participants: []string{"-80", "80-"}, Local: map[string]string{"-80": pos(1)}, Targets: []ShardPos{{"0", pos(1)}}}

	for _, tc := range []struct {
		name     string
		cur      *binlogdatapb.VGtid
		topo     map[string]source.ShardState
		journals []*Journal
		outcome  Outcome
		want     map[string]string
		missing  []string
	}{
		{"all serving", vg("0", 42), map[string]source.ShardState{"0": serving}, nil, Passthrough, map[string]string{"0": pos(42)}, nil},
		{"all serving, a journal of other shards recorded", vg("0", 42), map[string]source.ShardState{"0": serving}, []*Journal{split4a}, Passthrough, map[string]string{"0": pos(42)}, nil},
		{"old shard readable, behind cutover: vtgate walks it", vg("0", 42), map[string]source.ShardState{"0": readable, "-80": serving, "80-": serving}, []*Journal{split}, Passthrough, map[string]string{"0": pos(42)}, nil},
		{"old shard readable, at cutover: rewrite", vg("0", 100), map[string]source.ShardState{"0": readable, "-80": serving, "80-": serving}, []*Journal{split}, Exact, map[string]string{"-80": pos(5), "80-": pos(6)}, nil},
		{"old shard gone, at cutover", vg("0", 100), map[string]source.ShardState{"-80": serving, "80-": serving}, []*Journal{split}, Exact, map[string]string{"-80": pos(5), "80-": pos(6)}, nil},
		{"old shard gone, past cutover", vg("0", 101), map[string]source.ShardState{"-80": serving, "80-": serving}, []*Journal{split}, Exact, map[string]string{"-80": pos(5), "80-": pos(6)}, nil},
		{"old shard gone, behind cutover: gap", vg("0", 99), map[string]source.ShardState{"-80": serving, "80-": serving}, []*Journal{split}, Resync, nil, []string{"customer/0"}},
		{"old shard gone, no journal: gap", vg("0", 100), map[string]source.ShardState{"-80": serving, "80-": serving}, nil, Resync, nil, []string{"customer/0"}},
		{"chain 0 -> 2 -> 4", vg("0", 100), map[string]source.ShardState{"-40": serving, "40-80": serving, "80-c0": serving, "c0-": serving}, []*Journal{split, split4a, split4b}, Exact,
			map[string]string{"-40": pos(3), "40-80": pos(4), "80-c0": pos(7), "c0-": pos(8)}, nil},
		{"chain, second hop behind: gap names it", vg("0", 100), map[string]source.ShardState{"-40": serving, "40-80": serving, "80-c0": serving, "c0-": serving},
			[]*Journal{split, journal(8, map[string]int{"-80": 50}, map[string]int{"-40": 3, "40-80": 4}), split4b}, Resync, nil, []string{"customer/-80"}},
		{"merge", vg("-80", 70, "80-", 90), map[string]source.ShardState{"0": serving}, []*Journal{merge}, Exact, map[string]string{"0": pos(1)}, nil},
		{"merge, one participant behind", vg("-80", 69, "80-", 90), map[string]source.ShardState{"0": serving}, []*Journal{merge}, Resync, nil, []string{"customer/-80", "customer/80-"}},
		{"merge, journal missing a participant's position", vg("-80", 70, "80-", 90), map[string]source.ShardState{"0": serving}, []*Journal{incomplete}, Resync, nil, []string{"customer/-80", "customer/80-"}},
		{"partial reshard keeps the untouched shard", vg("-80", 5, "80-", 33), map[string]source.ShardState{"-40": serving, "40-80": serving, "80-": serving}, []*Journal{split4a}, Exact,
			map[string]string{"-40": pos(3), "40-80": pos(4), "80-": pos(33)}, nil},
		{"shard down, no journal: gap instead of a 90 s hang", vg("0", 42), map[string]source.ShardState{}, nil, Resync, nil, []string{"customer/0"}},
		// The same split done again after a merge back (a journal id
		// repeats): the second "0" is another incarnation, so a cursor of
		// it crosses the second split only, and one of the first "0" the
		// first only, however their GTIDs compare.
		{"repeated journal id: a cursor of the second 0 crosses the second split", inc(vg("0", 500), "0", split.Key), map[string]source.ShardState{"-80": serving, "80-": serving},
			[]*Journal{split, merge, again}, Exact, map[string]string{"-80": pos(55) + "~" + merge.Key, "80-": pos(66) + "~" + merge.Key}, nil},
		{"repeated journal id: a cursor of the first 0 is not one of the second", vg("0", 500), map[string]source.ShardState{"-80": serving, "80-": serving},
			[]*Journal{split, merge, again}, Resync, nil, []string{"customer/-80", "customer/80-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			annotate(tc.journals, nil)
			d := Decide(tc.cur, topo(tc.topo), map[string][]*Journal{"customer": tc.journals})
			checkDecision(t, d, tc.outcome, tc.want, tc.missing)
		})
	}
}

// checkDecision fails t unless d has the outcome, the position (want; nil:
// any) and the missing shards given.
func checkDecision(t *testing.T, d Decision, outcome Outcome, want map[string]string, missing []string) {
	t.Helper()
	if d.Outcome != outcome {
		t.Fatalf("outcome %s, want %s (missing %v)", d.Outcome, outcome, d.Missing)
	}
	if want != nil && !reflect.DeepEqual(shardsOf(d.VGtid), want) {
		t.Fatalf("position %v, want %v", shardsOf(d.VGtid), want)
	}
	if !reflect.DeepEqual(d.Missing, missing) {
		t.Fatalf("missing %v, want %v", d.Missing, missing)
	}
}

func TestBehindCutover(t *testing.T) {
	split := journal(7, map[string]int{"0": 100}, map[string]int{"-80": 5, "80-": 6})
	merge := journal(10, map[string]int{"-80": 70, "80-": 80}, map[string]int{"0": 1})
	incomplete := &Journal{Keyspace: "customer", ID: 11, Participants: []string{"-80", "80-"}, Local: map[string]string{"-80": pos(70)}}
	midCopy := vg("-80", 70, "80-", 90)
	midCopy.ShardGtids[1].TablePKs = []*binlogdatapb.TableLastPK{{TableName: "customer"}}
	notStarted := vg("-80", 70, "80-", 90)
	notStarted.ShardGtids[1].Gtid = ""
	for _, tc := range []struct {
		name string
		cur  *binlogdatapb.VGtid
		j    *Journal
		want bool
	}{
		{"behind", vg("0", 99), split, true},
		{"at the cutover", vg("0", 100), split, false},
		{"past the cutover", vg("0", 150), split, false},
		{"already on the new shards", vg("-80", 5, "80-", 6), split, false},
		{"merge, one participant behind", vg("-80", 70, "80-", 79), merge, true},
		{"merge, at the cutover", vg("-80", 70, "80-", 80), merge, false},
		{"merge, a participant missing", vg("-80", 70), merge, false},
		{"merge, a participant mid-copy", midCopy, merge, true},
		{"merge, a participant's copy not started", notStarted, merge, true},
		{"incomplete journal, behind on the recorded participant", vg("-80", 69, "80-", 1), incomplete, true},
		{"incomplete journal, past the recorded participant", vg("-80", 70, "80-", 1), incomplete, false},
		{"another domain: not ordered, so not past", vgGtid("0", "MariaDB/1-1-500"), split, true},
	} {
		if got := BehindCutover(tc.cur, tc.j); got != tc.want {
			t.Errorf("%s: BehindCutover(%v, %v) = %v", tc.name, shardsOf(tc.cur), tc.j.Local, got)
		}
	}
}

func vgGtid(shard, gtid string) *binlogdatapb.VGtid {
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: shard, Gtid: gtid}}}
}

func TestApply(t *testing.T) {
	split4a := journal(8, map[string]int{"-80": 5}, map[string]int{"-40": 3, "40-80": 4})
	cur := vg("-80", 5, "80-", 33)
	cur.ShardGtids = append(cur.ShardGtids, &binlogdatapb.ShardGtid{Keyspace: "commerce", Shard: "-80", Gtid: pos(9)})
	got := split4a.Apply(position.Of(cur)).String()
	want := "customer/80-@" + pos(33) + " commerce/-80@" + pos(9) + " customer/-40@" + pos(3) + " customer/40-80@" + pos(4)
	if got != want {
		t.Fatalf("Apply = %s, want %s", got, want)
	}
	if len(cur.ShardGtids) != 3 || cur.ShardGtids[0].Shard != "-80" {
		t.Fatalf("Apply changed the cursor it rewrote: %v", cur)
	}
}

// 0 → -80,80- → 0: the second "0" is another shard (DESIGN §4 rule 6). A
// cursor of the first is never handed to it: it is rebuilt through both
// journals when it can be, and is a gap when it cannot; a cursor of the
// second passes.
func TestDecideAcrossIncarnations(t *testing.T) {
	split := journal(7, map[string]int{"0": 100}, map[string]int{"-80": 5, "80-": 6})
	merge := journal(10, map[string]int{"-80": 5, "80-": 6}, map[string]int{"0": 1})
	list := []*Journal{split, merge}
	annotate(list, nil)
	journals := map[string][]*Journal{"customer": list}
	serving0 := topo(map[string]source.ShardState{"0": serving})
	copying0 := topo(map[string]source.ShardState{"-80": serving, "80-": serving, "0": readable}, "0")
	second := func(n int) *binlogdatapb.VGtid { return inc(vg("0", n), "0", split.Key) }

	for _, tc := range []struct {
		name    string
		cur     *binlogdatapb.VGtid
		topo    source.Topology
		outcome Outcome
		want    map[string]string
		missing []string
	}{
		{"first 0 at the split: both journals, onto the second 0", vg("0", 100), serving0, Exact, map[string]string{"0": pos(1) + "~" + split.Key}, nil},
		{"first 0 behind the split: a gap, not the second 0's binlog", vg("0", 42), serving0, Resync, nil, []string{"customer/0"}},
		{"second 0: passes", second(3), serving0, Passthrough, map[string]string{"0": pos(3) + "~" + split.Key}, nil},
		{"first 0 while the second copies: not handed to it", vg("0", 42), copying0, Resync, nil, []string{"customer/0"}},
		{"-80,80- at the merge: onto the second 0", vg("-80", 5, "80-", 6), serving0, Exact, map[string]string{"0": pos(1) + "~" + split.Key}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.cur, tc.topo, journals)
			checkDecision(t, d, tc.outcome, tc.want, tc.missing)
		})
	}
}

// Live tells the retired shard still running from a new one of its name
// by its primary's term.
func TestLiveIncarnation(t *testing.T) {
	split := journal(7, map[string]int{"0": 100}, map[string]int{"-80": 5, "80-": 6})
	list := []*Journal{split}
	before, after := split.SeenAt.Add(-time.Hour), split.SeenAt.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		shard string
		state source.ShardState
		since time.Time
		want  string
	}{
		{"never retired", "-80", serving, time.Time{}, ""},
		{"retired, still running (switch to complete)", "0", readable, before, ""},
		{"retired, serving again on its old primary (reverse traffic)", "0", serving, before, ""},
		{"created again under the name", "0", serving, after, split.Key},
		{"created again, still copying", "0", readable, after, split.Key},
		{"term unknown: counted new", "0", readable, time.Time{}, split.Key},
	} {
		if got := Live(list, tc.shard, tc.state, tc.since); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A journal handed on by a reader carries incarnations; its record and
// key are those of the journal vtgate sent, or the watcher looks for a
// journal nobody recorded.
func TestJournalKeyIgnoresIncarnations(t *testing.T) {
	raw := &binlogdatapb.Journal{Id: 10, MigrationType: binlogdatapb.MigrationType_SHARDS, LocalPosition: pos(70),
		Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: "customer", Shard: "-80"}, {Keyspace: "customer", Shard: "80-"}},
		ShardGtids:   []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: "0", Gtid: pos(1)}}}
	stamped := &binlogdatapb.Journal{Id: 10, MigrationType: binlogdatapb.MigrationType_SHARDS, LocalPosition: pos(70) + "~a",
		Participants: raw.Participants,
		ShardGtids:   []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: "0", Gtid: pos(1) + "~b"}}}
	a, _ := FromEvent("customer", "-80", raw)
	b, _ := FromEvent("customer", "-80", stamped)
	if a.Key != b.Key || !reflect.DeepEqual(a.Targets, b.Targets) || a.Local["-80"] != b.Local["-80"] {
		t.Fatalf("raw %+v, stamped %+v", a, b)
	}
}
