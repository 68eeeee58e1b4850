package reshard

import (
	"fmt"
	"reflect"
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

func topo(states map[string]source.ShardState) source.Topology {
	t := source.Topology{Shards: map[string]source.ShardState{}, Keyspaces: map[string]bool{"customer": true}}
	for s, st := range states {
		t.Shards["customer/"+s] = st
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
		{"all serving", vg("0", 42), map[string]source.ShardState{"0": serving}, []*Journal{split}, Passthrough, map[string]string{"0": pos(42)}, nil},
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
		{"repeated journal id: the latest passed cutover wins", vg("0", 500), map[string]source.ShardState{"-80": serving, "80-": serving},
			[]*Journal{split, journal(7, map[string]int{"0": 400}, map[string]int{"-80": 55, "80-": 66})}, Exact, map[string]string{"-80": pos(55), "80-": pos(66)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.cur, topo(tc.topo), map[string][]*Journal{"customer": tc.journals})
			if d.Outcome != tc.outcome {
				t.Fatalf("outcome %s, want %s (missing %v)", d.Outcome, tc.outcome, d.Missing)
			}
			if tc.want != nil && !reflect.DeepEqual(shardsOf(d.VGtid), tc.want) {
				t.Fatalf("position %v, want %v", shardsOf(d.VGtid), tc.want)
			}
			if !reflect.DeepEqual(d.Missing, tc.missing) {
				t.Fatalf("missing %v, want %v", d.Missing, tc.missing)
			}
		})
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
