package position_test

import (
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// The start positions vtgate is asked for (source.NowPosition, SnapshotPosition).
var (
	startNow      = position.New(position.Shard{Keyspace: "customer", GTID: position.CurrentGTID})
	startSnapshot = position.New(position.Shard{Keyspace: "customer"})
)

func TestStates(t *testing.T) {
	p := position.New
	for _, tc := range []struct {
		name                      string
		pos                       position.Position
		concrete, copying, atOpen bool
	}{
		{"zero", position.Position{}, false, false, false},
		{"no entries", position.Of(&binlogdatapb.VGtid{}), false, false, false},
		{"start now", startNow, false, false, true},
		{"start with a snapshot", startSnapshot, false, true, false},
		{"named shard at current", p(at("-80", position.CurrentGTID)), false, false, true},
		{"one shard resolved, one still current", p(at("-80", maria("0-1-5")), at("80-", position.CurrentGTID)), false, false, true},
		{"named shard beside a keyspace-wide entry", p(at("-80", maria("0-1-5")), position.Shard{Keyspace: "commerce", GTID: position.CurrentGTID}), false, false, true},
		{"mariadb", p(at("-80", maria("0-1-5")), at("80-", maria("0-2-7,1-3-2"))), true, false, false},
		{"mysql", p(at("0", my56(uuidA+":1-5:7-10"))), true, false, false},
		{"copy not started on one shard", p(copying("-80", maria("0-1-5")), at("80-", "")), true, true, false},
		{"part way through a copy", p(copying("0", maria("0-1-5"))), true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pos.Concrete(); got != tc.concrete {
				t.Errorf("Concrete(%v) = %v, want %v", tc.pos, got, tc.concrete)
			}
			if got := tc.pos.Copying(); got != tc.copying {
				t.Errorf("Copying(%v) = %v, want %v", tc.pos, got, tc.copying)
			}
			if got := tc.pos.AtOpen(); got != tc.atOpen {
				t.Errorf("AtOpen(%v) = %v, want %v", tc.pos, got, tc.atOpen)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	p := position.New(at("-80", maria("0-1-5")), copying("80-", maria("0-2-7")),
		position.Shard{Keyspace: "commerce", Shard: "-80", GTID: my56(uuidA + ":1-3")})
	s, ok := p.Lookup("customer", "80-")
	if !ok || s.GTID != maria("0-2-7") || len(s.TablePKs) != 1 || s.Key() != "customer/80-" {
		t.Errorf("Lookup(customer, 80-) = %v, %v", s, ok)
	}
	if s, ok := p.Lookup("commerce", "-80"); !ok || s.GTID != my56(uuidA+":1-3") {
		t.Errorf("Lookup(commerce, -80) = %v, %v: the keyspace is part of the key", s, ok)
	}
	if s, ok := p.Lookup("customer", "c0-"); ok {
		t.Errorf("Lookup of a shard the position lacks = %v", s)
	}
	if s, ok := (position.Position{}).Lookup("customer", "-80"); ok {
		t.Errorf("Lookup on the zero position = %v", s)
	}
	shards := p.Shards()
	if len(shards) != 3 || shards[0].Key() != "customer/-80" || shards[1].Key() != "customer/80-" || shards[2].Key() != "commerce/-80" {
		t.Errorf("Shards() = %v, want the entries in order", shards)
	}
}

func TestIdentical(t *testing.T) {
	p := position.New
	base := p(at("-80", maria("0-1-5,1-2-7")), at("80-", maria("0-2-7")))
	for _, tc := range []struct {
		name string
		a, b position.Position
		want bool
	}{
		{"same", base, p(at("-80", maria("0-1-5,1-2-7")), at("80-", maria("0-2-7"))), true},
		{"zero and no entries", position.Position{}, position.Of(&binlogdatapb.VGtid{}), true},
		{"zero and some", position.Position{}, base, false},
		{"entries in another order", base, p(at("80-", maria("0-2-7")), at("-80", maria("0-1-5,1-2-7"))), false},
		{"same GTID set, other text", base, p(at("-80", maria("1-2-7,0-1-5")), at("80-", maria("0-2-7"))), false},
		{"one shard moved", base, p(at("-80", maria("0-1-5,1-2-8")), at("80-", maria("0-2-7"))), false},
		{"copy progress differs", p(copying("-80", maria("0-1-5"))), p(at("-80", maria("0-1-5"))), false},
		{"same copy progress", p(copying("-80", maria("0-1-5"))), p(copying("-80", maria("0-1-5"))), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Identical(tc.b); got != tc.want {
				t.Errorf("(%v).Identical(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Identical(tc.a); got != tc.want {
				t.Errorf("(%v).Identical(%v) = %v, want %v", tc.b, tc.a, got, tc.want)
			}
		})
	}
	// Text is what Identical sees, GTID sets are what Compare sees.
	other := p(at("-80", maria("1-2-7,0-1-5")), at("80-", maria("0-2-7")))
	if base.Identical(other) || base.Compare(other) != position.Equal {
		t.Errorf("the same GTID sets written differently: Identical %v, Compare %v", base.Identical(other), base.Compare(other))
	}
}

func TestClone(t *testing.T) {
	orig := position.New(copying("-80", maria("0-1-5")), at("80-", maria("0-2-7")))
	c := orig.Clone()
	if !c.Identical(orig) {
		t.Fatalf("clone %v differs from %v", c, orig)
	}
	v := c.VGtid()
	v.ShardGtids[0].Gtid = maria("0-1-99")
	v.ShardGtids[0].TablePKs[0].TableName = "changed"
	v.ShardGtids = append(v.ShardGtids, &binlogdatapb.ShardGtid{Keyspace: "customer", Shard: "c0-"})
	if s, _ := orig.Lookup("customer", "-80"); s.GTID != maria("0-1-5") || s.TablePKs[0].TableName != "customer" || orig.Len() != 2 {
		t.Errorf("changing a clone changed the original: %v", orig)
	}
	if z := (position.Position{}).Clone(); !z.IsZero() || z.VGtid() != nil {
		t.Errorf("clone of the zero position = %v", z)
	}
}

func TestString(t *testing.T) {
	p := position.New(at("-80", maria("0-1-5")), copying("80-", maria("0-2-7")), position.Shard{Keyspace: "commerce", GTID: position.CurrentGTID})
	want := "customer/-80@MariaDB/0-1-5 customer/80-@MariaDB/0-2-7 (copying) commerce@current"
	if got := p.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (position.Position{}).String(); got != "(none)" {
		t.Errorf("zero String() = %q", got)
	}
}

func TestOrderString(t *testing.T) {
	for o, want := range map[position.Order]string{
		position.Before: "before", position.Equal: "equal", position.After: "after", position.Incomparable: "incomparable",
	} {
		if got := o.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", o, got, want)
		}
	}
	var zero position.Order
	if zero != position.Incomparable {
		t.Error("the zero Order is not Incomparable: a comparison that did not happen would read as an order")
	}
}
