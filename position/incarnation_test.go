package position_test

import (
	"errors"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// Two incarnations of shard "0" (before a split, after the merge back):
// their GTID sets read as ordered by accident, so only the incarnation
// keeps them apart.
func TestIncarnationsAreDifferentShards(t *testing.T) {
	old := at("0", maria("0-101-1557"))
	merged := at("0", maria("0-101-378")).WithIncarnation("j1")
	later := at("0", maria("0-101-900")).WithIncarnation("j1")

	if o := old.Compare(merged); o != position.Incomparable {
		t.Errorf("old 0 vs merged 0: %v, want incomparable (the same name, another shard)", o)
	}
	if old.Covers(merged) || merged.Covers(old) {
		t.Error("one incarnation covers the other")
	}
	if o := later.Compare(merged); o != position.After {
		t.Errorf("two positions of one incarnation: %v, want after", o)
	}
	if o := position.CompareGTID(joined(old), joined(merged)); o != position.Incomparable {
		t.Errorf("CompareGTID across incarnations: %v", o)
	}
	p, q := position.New(old), position.New(merged)
	if p.Covers(q) || q.Covers(p) || p.Compare(q) != position.Incomparable {
		t.Errorf("positions %v and %v order across incarnations", p, q)
	}
	if got := p.ShardsBehind(q); len(got) != 1 {
		t.Errorf("ShardsBehind = %v, want the merged shard", got)
	}
}

func joined(s position.Shard) string { return position.New(s).VGtid().ShardGtids[0].Gtid }

// The incarnation travels in the GTID text, through every encoding, and
// never reaches vtgate.
func TestIncarnationTravelsButNotToVTGate(t *testing.T) {
	s := at("0", maria("0-101-378")).WithIncarnation("3fa9c1")
	p := position.New(s, at("-80", maria("0-1-5")))
	if got, want := joined(s), "MariaDB/0-101-378~3fa9c1"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := position.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := back.Lookup("customer", "0"); got.Incarnation != "3fa9c1" || got.GTID != "MariaDB/0-101-378" {
		t.Errorf("after a round trip: %+v", got)
	}
	if _, err := position.ParseGTID(joined(s)); err != nil {
		t.Errorf("ParseGTID of a stamped entry: %v", err)
	}
	v := p.ForVTGate()
	if v.ShardGtids[0].Gtid != "MariaDB/0-101-378" || v.ShardGtids[1].Gtid != "MariaDB/0-1-5" {
		t.Errorf("ForVTGate = %v", v)
	}
	if got, _ := back.Lookup("customer", "0"); got.Incarnation != "3fa9c1" {
		t.Error("ForVTGate modified the position")
	}
	plain := position.New(at("-80", maria("0-1-5")))
	if plain.ForVTGate() != plain.VGtid() {
		t.Error("ForVTGate copied a position without incarnations")
	}
	if got := position.New(at("0", "").WithIncarnation("x"), at("-80", position.CurrentGTID).WithIncarnation("x")).VGtid(); got.ShardGtids[0].Gtid != "" || got.ShardGtids[1].Gtid != position.CurrentGTID {
		t.Errorf("entries that are no binlog position got an incarnation: %v", got)
	}
}

func TestStamp(t *testing.T) {
	v := position.New(at("-80", maria("0-1-5")), at("80-", maria("0-2-7")), position.Shard{Keyspace: "customer", GTID: position.CurrentGTID}).VGtid()
	inc := map[string]string{"-80": "j2", "80-": ""}
	got, err := position.Stamp(v, func(ks, shard string) (string, error) { return inc[shard], nil })
	if err != nil {
		t.Fatal(err)
	}
	p := position.Of(got)
	if s, _ := p.Lookup("customer", "-80"); s.Incarnation != "j2" {
		t.Errorf("-80: %+v", s)
	}
	if s, _ := p.Lookup("customer", "80-"); s.Incarnation != "" {
		t.Errorf("80-: %+v", s)
	}
	if v.ShardGtids[0].Gtid != "MariaDB/0-1-5" {
		t.Error("Stamp modified its argument")
	}
	same, _ := position.Stamp(v, func(string, string) (string, error) { return "", nil })
	if same != v {
		t.Error("Stamp copied a position whose incarnations are all empty")
	}
	boom := errors.New("unknown")
	if _, err := position.Stamp(v, func(string, string) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v", err)
	}
	if in := p.Incarnations(); in["customer/-80"] != "j2" || in["customer/80-"] != "" || len(in) != 2 {
		t.Errorf("Incarnations = %v", in)
	}
}
