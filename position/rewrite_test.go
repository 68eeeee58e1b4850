package position_test

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/position"
)

func TestReplace(t *testing.T) {
	p := position.New
	commerce := position.Shard{Keyspace: "commerce", Shard: "-80", GTID: maria("0-9-1")}
	for _, tc := range []struct {
		name  string
		pos   position.Position
		old   []string
		with  []position.Shard
		want  string
		order position.Order // of the result against pos
	}{
		{"split", p(at("0", maria("0-1-100"))), []string{"0"}, []position.Shard{at("-80", maria("0-2-5")), at("80-", maria("0-3-6"))},
			"customer/-80@MariaDB/0-2-5 customer/80-@MariaDB/0-3-6", position.Incomparable},
		{"merge", p(at("-80", maria("0-2-70")), at("80-", maria("0-3-90"))), []string{"-80", "80-"}, []position.Shard{at("0", maria("0-4-1"))},
			"customer/0@MariaDB/0-4-1", position.Incomparable},
		{"partial split keeps the untouched shard first",
			p(at("-80", maria("0-2-5")), at("80-", maria("0-3-33"))), []string{"-80"}, []position.Shard{at("-40", maria("0-4-3")), at("40-80", maria("0-5-4"))},
			"customer/80-@MariaDB/0-3-33 customer/-40@MariaDB/0-4-3 customer/40-80@MariaDB/0-5-4", position.Incomparable},
		{"same shard name in another keyspace is left alone",
			p(commerce, at("-80", maria("0-2-5"))), []string{"-80"}, []position.Shard{at("-40", maria("0-4-3"))},
			"commerce/-80@MariaDB/0-9-1 customer/-40@MariaDB/0-4-3", position.Incomparable},
		{"participant not in the position", p(at("80-", maria("0-3-33"))), []string{"-80"}, []position.Shard{at("-40", maria("0-4-3"))},
			"customer/80-@MariaDB/0-3-33 customer/-40@MariaDB/0-4-3", position.Incomparable},
		{"mysql", p(at("0", my56(uuidA+":1-10"))), []string{"0"}, []position.Shard{at("-80", my56(uuidB+":1-3"))},
			"customer/-80@MySQL56/" + uuidB + ":1-3", position.Incomparable},
		{"nothing replaced, nothing added", p(at("0", maria("0-1-100"))), nil, nil,
			"customer/0@MariaDB/0-1-100", position.Equal},
		{"zero position", position.Position{}, []string{"0"}, []position.Shard{at("-80", maria("0-2-5"))},
			"customer/-80@MariaDB/0-2-5", position.Incomparable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pos.Clone()
			got := tc.pos.Replace("customer", tc.old, tc.with...)
			if got.String() != tc.want {
				t.Errorf("Replace = %v, want %v", got, tc.want)
			}
			if !tc.pos.Identical(before) {
				t.Errorf("Replace changed its receiver: %v, was %v", tc.pos, before)
			}
			if o := got.Compare(tc.pos); o != tc.order {
				t.Errorf("result %v against %v: %v, want %v", got, tc.pos, o, tc.order)
			}
		})
	}
}

func TestWithShard(t *testing.T) {
	p := position.New(at("-80", maria("0-1-5")), at("80-", maria("0-2-7")))
	before := p.Clone()

	moved := p.WithShard(at("-80", maria("0-1-6")))
	if got, want := moved.String(), "customer/-80@MariaDB/0-1-6 customer/80-@MariaDB/0-2-7"; got != want {
		t.Errorf("WithShard in place = %v, want %v", got, want)
	}
	if o := moved.Compare(p); o != position.After {
		t.Errorf("one shard moved on: %v against the original, want after", o)
	}
	if !p.Identical(before) {
		t.Errorf("WithShard changed its receiver: %v", p)
	}

	added := p.WithShard(at("c0-", maria("0-3-1")))
	if got, want := added.String(), "customer/-80@MariaDB/0-1-5 customer/80-@MariaDB/0-2-7 customer/c0-@MariaDB/0-3-1"; got != want {
		t.Errorf("WithShard of a new shard = %v, want %v", got, want)
	}
	if !added.Covers(p) || p.Covers(added) {
		t.Errorf("a position with one more shard must cover the original and not the reverse")
	}

	// Moving into a copy phase is recorded as such.
	c := p.WithShard(copying("80-", maria("0-2-7")))
	if !c.Copying() || c.Compare(p) != position.Incomparable {
		t.Errorf("copy phase entry: copying %v, order %v", c.Copying(), c.Compare(p))
	}
}

func TestInKeyspace(t *testing.T) {
	p := position.New(at("-80", maria("0-1-5")), position.Shard{Keyspace: "commerce", Shard: "0", GTID: maria("0-9-1")}, at("80-", maria("0-2-7")))
	if got, want := p.InKeyspace("customer").String(), "customer/-80@MariaDB/0-1-5 customer/80-@MariaDB/0-2-7"; got != want {
		t.Errorf("InKeyspace(customer) = %v, want %v", got, want)
	}
	if got, want := p.InKeyspace("commerce").String(), "commerce/0@MariaDB/0-9-1"; got != want {
		t.Errorf("InKeyspace(commerce) = %v, want %v", got, want)
	}
	if got := p.InKeyspace("other"); !got.IsZero() {
		t.Errorf("InKeyspace(other) = %v", got)
	}
	if p.Len() != 3 {
		t.Errorf("InKeyspace changed its receiver: %v", p)
	}
}
