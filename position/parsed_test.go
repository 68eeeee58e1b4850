package position_test

import (
	"fmt"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// TestCompareGTIDManySets compares more distinct GTID sets, of both
// flavours, than the parse cache has slots, each against its neighbours
// and again in another order: every answer must be the one its sequence
// numbers give, whatever the cache holds (sets sharing a slot, sets
// evicted and parsed again, invalid text cached as such).
func TestCompareGTIDManySets(t *testing.T) {
	const n = 5000
	flavours := []struct {
		name string
		set  func(i int) string
	}{
		{"MariaDB", func(i int) string { return maria(fmt.Sprintf("0-1-%d", i+1)) }},
		{"MySQL56", func(i int) string { return my56(fmt.Sprintf("%s:1-%d", uuidA, i+1)) }},
	}
	want := func(i, j int) position.Order {
		switch {
		case i < j:
			return position.Before
		case i > j:
			return position.After
		}
		return position.Equal
	}
	for _, f := range flavours {
		t.Run(f.name, func(t *testing.T) {
			for round, step := range []int{1, 7, 1} {
				for i := 0; i < n; i++ {
					j := (i + step) % n
					if got := position.CompareGTID(f.set(i), f.set(j)); got != want(i, j) {
						t.Fatalf("round %d: %s vs %s = %s, want %s", round, f.set(i), f.set(j), got, want(i, j))
					}
					if got := position.CompareGTID(f.set(i), f.set(i)); got != position.Equal {
						t.Fatalf("round %d: %s vs itself = %s", round, f.set(i), got)
					}
				}
			}
			if got := position.CompareGTID(f.name+"/not a set", f.set(0)); got != position.Incomparable {
				t.Fatalf("invalid text compared %s", got)
			}
			if got := position.CompareGTID(f.name+"/not a set", f.name+"/not a set"); got != position.Incomparable {
				t.Fatalf("invalid text compared with itself (cached): %s", got)
			}
		})
	}
}

// BenchmarkCompareGTID is a join's comparison: a reader's set against the
// sets of a tail's history, which repeat from one join to the next.
func BenchmarkCompareGTID(b *testing.B) {
	reader := maria("0-1-5000")
	var sets []string
	for i := range 64 {
		sets = append(sets, maria(fmt.Sprintf("0-1-%d", 4000+i*16)))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		position.CompareGTID(reader, sets[i%len(sets)])
	}
}
