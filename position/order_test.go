package position_test

import (
	"errors"
	"slices"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "4f22ab58-82db-42f2-af44-d91bb0530673"
)

func maria(set string) string { return "MariaDB/" + set }
func my56(set string) string  { return "MySQL56/" + set }

// at builds the entry of customer/shard.
func at(shard, gtid string) position.Shard {
	return position.Shard{Keyspace: "customer", Shard: shard, GTID: gtid}
}

// copying builds an entry of customer/shard part way through its copy phase.
func copying(shard, gtid string) position.Shard {
	s := at(shard, gtid)
	s.TablePKs = []*binlogdatapb.TableLastPK{{TableName: "customer"}}
	return s
}

func reverse(o position.Order) position.Order {
	switch o {
	case position.Before:
		return position.After
	case position.After:
		return position.Before
	}
	return o
}

func TestCompareGTID(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want position.Order
	}{
		// MariaDB: one GTID per replication domain.
		{"mariadb same", maria("0-1-5"), maria("0-1-5"), position.Equal},
		{"mariadb numeric, not text", maria("0-1-9"), maria("0-1-10"), position.Before},
		{"mariadb ahead", maria("0-1-123"), maria("0-1-122"), position.After},
		{"mariadb other server, same sequence", maria("0-1-5"), maria("0-2-5"), position.Equal},
		{"mariadb other server, later sequence", maria("0-2-6"), maria("0-1-5"), position.After},
		// A reparent: the new primary continues the domain's sequence
		// under its own server id (seen in e2e TestReparents).
		{"mariadb after a reparent", maria("0-54477278-303"), maria("0-1475387062-302"), position.After},
		{"mariadb disjoint domains", maria("0-1-5"), maria("1-1-5"), position.Incomparable},
		{"mariadb multi-domain same", maria("0-1-5,1-2-7"), maria("0-1-5,1-2-7"), position.Equal},
		{"mariadb multi-domain, text order differs", maria("1-2-7,0-1-5"), maria("0-1-5,1-2-7"), position.Equal},
		{"mariadb multi-domain, one domain behind", maria("0-1-5,1-2-7"), maria("0-1-6,1-2-7"), position.Before},
		{"mariadb multi-domain, both ahead", maria("0-1-6,1-2-8"), maria("0-1-5,1-2-7"), position.After},
		{"mariadb multi-domain, ahead in one, behind in the other", maria("0-1-6,1-2-6"), maria("0-1-5,1-2-7"), position.Incomparable},
		{"mariadb extra domain", maria("0-1-5,1-2-7"), maria("0-1-5"), position.After},
		{"mariadb extra domain but behind", maria("0-1-4,1-2-7"), maria("0-1-5"), position.Incomparable},
		// MySQL 5.6+: intervals per server UUID, possibly with gaps.
		{"mysql same", my56(uuidA + ":1-10"), my56(uuidA + ":1-10"), position.Equal},
		{"mysql behind", my56(uuidA + ":1-10"), my56(uuidA + ":1-11"), position.Before},
		{"mysql numeric, not text", my56(uuidA + ":1-9"), my56(uuidA + ":1-10"), position.Before},
		{"mysql gap is behind the filled set", my56(uuidA + ":1-5:7-10"), my56(uuidA + ":1-10"), position.Before},
		{"mysql filled set is after the gap", my56(uuidA + ":1-10"), my56(uuidA + ":1-5:7-10"), position.After},
		{"mysql gaps on both sides", my56(uuidA + ":1-5:7-10"), my56(uuidA + ":1-6:8-10"), position.Incomparable},
		{"mysql disjoint intervals", my56(uuidA + ":1-5"), my56(uuidA + ":6-10"), position.Incomparable},
		{"mysql disjoint servers", my56(uuidA + ":1-10"), my56(uuidB + ":1-10"), position.Incomparable},
		{"mysql extra server", my56(uuidA + ":1-10," + uuidB + ":1-3"), my56(uuidA + ":1-10"), position.After},
		{"mysql two servers, text order differs", my56(uuidB + ":1-3," + uuidA + ":1-10"), my56(uuidA + ":1-10," + uuidB + ":1-3"), position.Equal},
		{"mysql two servers, ahead on one, behind on the other", my56(uuidA + ":1-11," + uuidB + ":1-2"), my56(uuidA + ":1-10," + uuidB + ":1-3"), position.Incomparable},
		// Across flavors, and things that are not GTID sets.
		{"flavors differ", maria("0-1-5"), my56(uuidA + ":1-5"), position.Incomparable},
		{"copy from the beginning", "", maria("0-1-5"), position.Incomparable},
		{"two empty GTIDs", "", "", position.Incomparable},
		{"current", position.CurrentGTID, maria("0-1-5"), position.Incomparable},
		{"two currents", position.CurrentGTID, position.CurrentGTID, position.Incomparable},
		{"empty set", "MariaDB/", maria("0-1-5"), position.Incomparable},
		{"no flavor", "0-1-5", maria("0-1-5"), position.Incomparable},
		{"unknown flavor", "Postgres/0/16B3748", maria("0-1-5"), position.Incomparable},
		{"bad mariadb syntax", maria("0-1"), maria("0-1-5"), position.Incomparable},
		{"bad mysql syntax", my56("not-a-uuid:1-5"), my56(uuidA + ":1-5"), position.Incomparable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := position.CompareGTID(tc.a, tc.b); got != tc.want {
				t.Errorf("CompareGTID(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got, want := position.CompareGTID(tc.b, tc.a), reverse(tc.want); got != want {
				t.Errorf("CompareGTID(%q, %q) = %v, want %v", tc.b, tc.a, got, want)
			}
		})
	}
}

func TestParseGTID(t *testing.T) {
	for _, tc := range []struct {
		gtid string
		kind error // nil: parses
	}{
		{maria("0-1-5"), nil},
		{maria("0-1-5,1-2-7"), nil},
		{my56(uuidA + ":1-5:7-10"), nil},
		{"", position.ErrNoGTID},
		{position.CurrentGTID, position.ErrNoGTID},
		{"MariaDB/", position.ErrNoGTID},
		{"MySQL56/", position.ErrNoGTID},
		{"0-1-5", position.ErrBadGTID},
		{"Postgres/1", position.ErrBadGTID},
		{maria("0-x-5"), position.ErrBadGTID},
		{my56(uuidA), position.ErrBadGTID},
	} {
		p, err := position.ParseGTID(tc.gtid)
		if tc.kind == nil {
			if err != nil || p.IsZero() {
				t.Errorf("ParseGTID(%q) = %v, %v; want a GTID set", tc.gtid, p, err)
			}
			continue
		}
		var pe *position.Error
		if !errors.Is(err, tc.kind) || !errors.As(err, &pe) || pe.Input != tc.gtid {
			t.Errorf("ParseGTID(%q) error %v; want an *Error of kind %v", tc.gtid, err, tc.kind)
		}
		if tc.kind == position.ErrBadGTID && (pe == nil || pe.Err == nil) {
			t.Errorf("ParseGTID(%q): the replication package's error is lost", tc.gtid)
		}
	}
}

func TestShardCompare(t *testing.T) {
	for _, tc := range []struct {
		name string
		s, t position.Shard
		want position.Order
	}{
		{"same shard, behind", at("-80", maria("0-1-4")), at("-80", maria("0-1-5")), position.Before},
		{"same shard, equal", at("-80", maria("0-1-5")), at("-80", maria("0-1-5")), position.Equal},
		{"same shard, mysql ahead", at("-80", my56(uuidA+":1-10")), at("-80", my56(uuidA+":1-9")), position.After},
		{"other shard", at("-80", maria("0-1-4")), at("80-", maria("0-1-5")), position.Incomparable},
		{"other keyspace", at("-80", maria("0-1-4")), position.Shard{Keyspace: "commerce", Shard: "-80", GTID: maria("0-1-5")}, position.Incomparable},
		{"copy phase, same GTID", copying("-80", maria("0-1-5")), at("-80", maria("0-1-5")), position.Incomparable},
		{"both copying", copying("-80", maria("0-1-5")), copying("-80", maria("0-1-6")), position.Incomparable},
		{"copy not started", at("-80", ""), at("-80", maria("0-1-5")), position.Incomparable},
		{"current", at("-80", position.CurrentGTID), at("-80", maria("0-1-5")), position.Incomparable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Compare(tc.t); got != tc.want {
				t.Errorf("%v.Compare(%v) = %v, want %v", tc.s, tc.t, got, tc.want)
			}
			if got := tc.t.Compare(tc.s); got != reverse(tc.want) {
				t.Errorf("%v.Compare(%v) = %v, want %v", tc.t, tc.s, got, reverse(tc.want))
			}
			covers := tc.want == position.Equal || tc.want == position.After
			if got := tc.s.Covers(tc.t); got != covers {
				t.Errorf("%v.Covers(%v) = %v, want %v", tc.s, tc.t, got, covers)
			}
		})
	}
}

func TestPositionCompare(t *testing.T) {
	p := position.New
	two := func(a, b string) position.Position { return p(at("-80", a), at("80-", b)) }
	for _, tc := range []struct {
		name string
		a, b position.Position
		want position.Order
	}{
		{"equal", two(maria("0-1-5"), maria("0-2-7")), two(maria("0-1-5"), maria("0-2-7")), position.Equal},
		{"behind on one shard", two(maria("0-1-5"), maria("0-2-7")), two(maria("0-1-5"), maria("0-2-8")), position.Before},
		{"behind on both", two(maria("0-1-4"), maria("0-2-7")), two(maria("0-1-5"), maria("0-2-8")), position.Before},
		{"ahead on one shard", two(maria("0-1-6"), maria("0-2-7")), two(maria("0-1-5"), maria("0-2-7")), position.After},
		{"ahead on one, behind on the other", two(maria("0-1-6"), maria("0-2-7")), two(maria("0-1-5"), maria("0-2-8")), position.Incomparable},
		{"numeric, not text", p(at("0", maria("0-1-9"))), p(at("0", maria("0-1-10"))), position.Before},
		{"entries in another order",
			p(at("80-", maria("0-2-7")), at("-80", maria("0-1-5"))), two(maria("0-1-5"), maria("0-2-8")), position.Before},
		{"multi-domain shard behind",
			two(maria("0-1-5,1-3-2"), maria("0-2-7")), two(maria("0-1-5,1-3-3"), maria("0-2-7")), position.Before},
		{"multi-domain shard disjoint",
			two(maria("0-1-5,1-3-4"), maria("0-2-7")), two(maria("0-1-6,1-3-3"), maria("0-2-7")), position.Incomparable},
		{"mysql gap on one shard",
			two(my56(uuidA+":1-5:7-10"), my56(uuidB+":1-3")), two(my56(uuidA+":1-10"), my56(uuidB+":1-3")), position.Before},
		{"mysql disjoint on one shard",
			two(my56(uuidA+":1-5"), my56(uuidB+":1-3")), two(my56(uuidA+":6-10"), my56(uuidB+":1-3")), position.Incomparable},
		{"other shards", p(at("0", maria("0-1-5"))), two(maria("0-1-6"), maria("0-2-7")), position.Incomparable},
		{"fewer shards", p(at("-80", maria("0-1-4"))), two(maria("0-1-5"), maria("0-2-7")), position.Incomparable},
		{"same count, one shard differs", two(maria("0-1-4"), maria("0-2-7")), p(at("-80", maria("0-1-5")), at("c0-", maria("0-2-8"))), position.Incomparable},
		{"shard listed twice", p(at("-80", maria("0-1-4")), at("-80", maria("0-1-4"))), two(maria("0-1-5"), maria("0-2-8")), position.Incomparable},
		{"same shard names in another keyspace",
			two(maria("0-1-4"), maria("0-2-7")),
			p(position.Shard{Keyspace: "commerce", Shard: "-80", GTID: maria("0-1-5")}, position.Shard{Keyspace: "commerce", Shard: "80-", GTID: maria("0-2-8")}),
			position.Incomparable},
		{"copy phase on one shard", p(copying("-80", maria("0-1-4")), at("80-", maria("0-2-7"))), two(maria("0-1-5"), maria("0-2-8")), position.Incomparable},
		{"identical copy phases", p(copying("-80", maria("0-1-4")), at("80-", "")), p(copying("-80", maria("0-1-4")), at("80-", "")), position.Incomparable},
		{"current", p(at("-80", position.CurrentGTID)), p(at("-80", maria("0-1-5"))), position.Incomparable},
		{"no entries", position.Position{}, position.Position{}, position.Incomparable},
		{"no entries against some", position.Position{}, two(maria("0-1-5"), maria("0-2-8")), position.Incomparable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Compare(tc.b); got != tc.want {
				t.Errorf("(%v).Compare(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Compare(tc.a); got != reverse(tc.want) {
				t.Errorf("(%v).Compare(%v) = %v, want %v", tc.b, tc.a, got, reverse(tc.want))
			}
		})
	}
}

func TestCoversAndShardsBehind(t *testing.T) {
	p := position.New
	cur := p(at("-80", maria("0-1-5")), at("80-", maria("0-2-7")), at("c0-", my56(uuidA+":1-10")))
	for _, tc := range []struct {
		name   string
		q      position.Position
		behind []string // keys of the entries of q that cur does not cover
	}{
		{"same position", cur, nil},
		{"subset, behind", p(at("-80", maria("0-1-4"))), nil},
		{"subset, equal", p(at("80-", maria("0-2-7"))), nil},
		{"ahead on one shard", p(at("-80", maria("0-1-6")), at("80-", maria("0-2-7"))), []string{"customer/-80"}},
		{"numeric, not text", p(at("-80", maria("0-1-10"))), []string{"customer/-80"}},
		{"mysql gap filled in q", p(at("c0-", my56(uuidA+":1-11"))), []string{"customer/c0-"}},
		{"mysql gap in q", p(at("c0-", my56(uuidA+":1-3:5-10"))), nil},
		{"disjoint domain", p(at("-80", maria("1-1-1"))), []string{"customer/-80"}},
		{"shard cur lacks", p(at("-40", maria("0-1-1")), at("80-", maria("0-2-1"))), []string{"customer/-40"}},
		{"other keyspace", p(position.Shard{Keyspace: "commerce", Shard: "-80", GTID: maria("0-1-1")}), []string{"commerce/-80"}},
		{"q copying", p(copying("80-", maria("0-2-1"))), []string{"customer/80-"}},
		{"q not a GTID", p(at("80-", position.CurrentGTID)), []string{"customer/80-"}},
		{"no entries", position.Position{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range cur.ShardsBehind(tc.q) {
				got = append(got, s.Key())
			}
			if !slices.Equal(got, tc.behind) {
				t.Errorf("ShardsBehind(%v) = %v, want %v", tc.q, got, tc.behind)
			}
			if covers := cur.Covers(tc.q); covers != (len(tc.behind) == 0) {
				t.Errorf("Covers(%v) = %v, want %v", tc.q, covers, len(tc.behind) == 0)
			}
		})
	}
	// A copy phase in the covering position covers nothing on that shard.
	mid := p(copying("-80", maria("0-1-9")), at("80-", maria("0-2-7")))
	if got := mid.ShardsBehind(p(at("-80", maria("0-1-1")))); len(got) != 1 {
		t.Errorf("a position mid-copy covers the shard it copies: %v", got)
	}
}
