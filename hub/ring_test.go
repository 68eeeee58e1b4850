package hub

import (
	"fmt"
	"maps"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// The per-shard join rule on a ring of two shards, for both GTID flavours:
// a reader joins at the newest entry whose starting position it covers on
// every shard, and only then; incomparable or older positions do not join.
func TestRingJoinAt(t *testing.T) {
	flavours := map[string]func(shard, n int) string{
		"MariaDB": func(shard, n int) string { return fmt.Sprintf("MariaDB/0-%d-%d", 100+shard, n) },
		"MySQL56": func(shard, n int) string {
			return fmt.Sprintf("MySQL56/%d0000000-0000-0000-0000-00000000000%d:1-%d", shard, shard, n)
		},
	}
	for name, g := range flavours {
		t.Run(name, func(t *testing.T) {
			at := func(a, b int) *binlogdatapb.VGtid {
				return fakevtgate.VGtid(ks, "-80", g(1, a), "80-", g(2, b))
			}
			// Ring from (10,10): a11 b11 a12 b12, so entry befores are
			// (10,10) (11,10) (11,11) (12,11); the head is (12,12).
			r := newRing(1<<20, 100, at(10, 10))
			for _, p := range [][2]int{{11, 10}, {11, 11}, {12, 11}, {12, 12}} {
				after := at(p[0], p[1])
				before, _ := r.head()
				r.append(&source.Txn{VGtid: after}, after, position.Of(before).Moved(position.Of(after)))
			}
			cases := []struct {
				name string
				pos  *binlogdatapb.VGtid
				seq  uint64
				ok   bool
			}{
				{"at the ring's start", at(10, 10), 0, true},
				{"in step with the tail", at(11, 11), 2, true},
				{"ahead on one shard (another replica's order)", at(12, 10), 1, true},
				{"at the head", at(12, 12), 4, true},
				{"ahead of the head", at(13, 12), 4, true},
				{"older than the ring on one shard", at(9, 12), 0, false},
				{"older than the ring", at(5, 5), 0, false},
				{"other shards", fakevtgate.VGtid(ks, "0", g(1, 12)), 0, false},
			}
			for _, c := range cases {
				seq, ok := r.joinAt(c.pos)
				if ok != c.ok || (ok && seq != c.seq) {
					t.Errorf("%s: joinAt = %d, %v; want %d, %v", c.name, seq, ok, c.seq, c.ok)
				}
			}
		})
	}
	// Positions of another GTID history (a disjoint MySQL56 server set)
	// are not comparable: no join.
	r := newRing(1<<20, 100, fakevtgate.VGtid(ks, "0", "MySQL56/00000000-0000-0000-0000-000000000001:1-10"))
	if _, ok := r.joinAt(fakevtgate.VGtid(ks, "0", "MySQL56/00000000-0000-0000-0000-000000000002:1-10")); ok {
		t.Error("joined with a position of another server's history")
	}
}

// Eviction keeps the ring within its bounds, keeps the newest entry
// whatever its size, and moves the ring's start with it.
func TestRingEviction(t *testing.T) {
	r := newRing(1<<20, 3, pos(0))
	for i := 1; i <= 5; i++ {
		r.append(&source.Txn{VGtid: pos(i)}, pos(i), []string{"0"})
	}
	if n, _ := r.stats(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	if _, ok := r.joinAt(pos(1)); ok {
		t.Fatal("joined at an evicted position")
	}
	if seq, ok := r.joinAt(pos(2)); !ok || seq != 2 {
		t.Fatalf("joinAt(2) = %d, %v; want 2, true", seq, ok)
	}
	big := newRing(10, 100, pos(0))
	big.append(&source.Txn{VGtid: pos(1)}, pos(1), []string{"0"})
	big.append(&source.Txn{VGtid: pos(2)}, pos(2), []string{"0"})
	if n, _ := big.stats(); n != 1 {
		t.Fatalf("%d entries in a ring smaller than one entry, want the newest only", n)
	}
}

// behind counts, per shard, the ring's transactions a position lacks and the
// age of the oldest of them; a position the ring does not reach is unknown.
func TestRingBehind(t *testing.T) {
	at := func(a, b int) *binlogdatapb.VGtid {
		return fakevtgate.VGtid(ks, "-80", fmt.Sprintf("MariaDB/0-101-%d", a), "80-", fmt.Sprintf("MariaDB/0-102-%d", b))
	}
	r := newRing(1<<20, 100, at(10, 10))
	// a11@100 b11@101 a12@102 b12@103 (commit times in Unix seconds)
	for i, p := range [][2]int{{11, 10}, {11, 11}, {12, 11}, {12, 12}} {
		after := at(p[0], p[1])
		before, _ := r.head()
		r.append(&source.Txn{VGtid: after, CommitTS: int64(100 + i)}, after, position.Of(before).Moved(position.Of(after)))
	}
	now := time.Unix(110, 0)
	got, ok := r.behind(ks, at(11, 10), now)
	if !ok {
		t.Fatal("a position inside the ring: not found")
	}
	want := map[string]ShardLag{"-80": {Transactions: 1, Seconds: 8}, "80-": {Transactions: 2, Seconds: 9}}
	if !maps.Equal(got, want) {
		t.Errorf("behind (11,10) = %v, want %v", got, want)
	}
	got, _ = r.behind(ks, at(12, 12), now)
	if want := map[string]ShardLag{"-80": {}, "80-": {}}; !maps.Equal(got, want) {
		t.Errorf("behind at the head = %v, want %v", got, want)
	}
	if _, ok := r.behind(ks, at(5, 5), now); ok {
		t.Error("a position older than the ring: reported")
	}
}
