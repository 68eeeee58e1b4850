package position_test

import (
	"slices"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/position"
)

func TestShardSets(t *testing.T) {
	p := position.New
	before := p(at("-80", maria("0-1-5")), at("80-", maria("0-2-7")))
	after := p(at("-80", maria("0-1-6")), at("80-", maria("0-2-7")))
	if got := before.Moved(after); !slices.Equal(got, []string{"-80"}) {
		t.Errorf("Moved = %v, want [-80]", got)
	}
	split := p(at("-40", maria("0-3-1")), at("40-80", maria("0-4-1")), at("80-", maria("0-2-7")))
	if got := before.Moved(split); !slices.Equal(got, []string{"-40", "40-80"}) {
		t.Errorf("Moved across a split = %v, want the new shards", got)
	}
	if !before.SameShards(after) || before.SameShards(split) || after.SameShards(p(at("-80", maria("0-1-6")))) {
		t.Error("SameShards compares shard names, not positions")
	}
	if got := split.ShardNames(); !slices.Equal(got, []string{"-40", "40-80", "80-"}) {
		t.Errorf("ShardNames = %v", got)
	}
	if got := split.Keyspace("other"); got != "customer" {
		t.Errorf("Keyspace = %q, want the first shard's", got)
	}
	if got := (position.Position{}).Keyspace("other"); got != "other" {
		t.Errorf("Keyspace of nothing = %q, want the default", got)
	}
}

// A reader holds a transaction when it covers the transaction's position on
// every shard it moved; advancing takes the moved shards (and new ones)
// from after and keeps the reader's own elsewhere.
func TestHoldsAndAdvance(t *testing.T) {
	p := position.New
	reader := p(at("-80", maria("0-1-9")), at("80-", maria("0-2-3")))
	txn := p(at("-80", maria("0-1-6")), at("80-", maria("0-2-4")))
	if !reader.Holds("customer", txn, []string{"-80"}) {
		t.Error("a reader past -80's position does not hold the transaction that moved -80")
	}
	if reader.Holds("customer", txn, []string{"80-"}) {
		t.Error("a reader behind 80-'s position holds the transaction that moved 80-")
	}
	if reader.Holds("customer", txn, []string{"-40"}) {
		t.Error("a reader holds a shard neither names")
	}
	got := reader.Advance(txn, []string{"80-"})
	want := p(at("-80", maria("0-1-9")), at("80-", maria("0-2-4")))
	if !got.Identical(want) {
		t.Errorf("Advance = %v, want %v", got, want)
	}
	merged := p(at("0", maria("0-5-1")))
	if got := reader.Advance(merged, []string{"0"}); !got.Identical(merged) {
		t.Errorf("Advance across a merge = %v, want %v (the old shards dropped)", got, merged)
	}
}
