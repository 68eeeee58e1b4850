package hub

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// An ack never moves a cursor back: a position strictly behind the stored
// one (same shards, GTID-set order, not text) is ignored; anything else,
// including a position on other shards, is stored.
func TestAckNeverMovesBack(t *testing.T) {
	two := func(a, b int) *binlogdatapb.VGtid {
		return fakevtgate.VGtid(ks, "-80", gtid(a), "80-", gtid(b))
	}
	e := newEnv(t)
	for _, tc := range []struct {
		name      string
		ack, want *binlogdatapb.VGtid
	}{
		{"first", pos(10), pos(10)},
		{"behind, although after as text", pos(9), pos(10)},
		{"repeated", pos(10), pos(10)},
		{"ahead", pos(11), pos(11)},
		{"other shards (a reshard)", two(1, 5), two(1, 5)},
		{"behind on one shard", two(1, 4), two(1, 5)},
		{"ahead on one shard, behind on the other", two(2, 4), two(2, 4)},
	} {
		if got := e.ack(t, "alice", tc.ack); !proto.Equal(got, tc.want) {
			t.Errorf("%s: ack %v stored %v, want %v", tc.name, tc.ack, got, tc.want)
		}
	}
}

// Acks from many writers at once (tabs, replicas) end at the furthest:
// none writes a position it compared with a state another one replaced.
func TestConcurrentAcksEndAtTheFurthest(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		c := NewCursors(st)
		const writers, each = 6, 15
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if _, err := c.Ack(context.Background(), "orders", "alice", pos(1+i*writers+w)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		got, err := c.Get(context.Background(), "orders", "alice")
		if err != nil {
			t.Fatal(err)
		}
		samePos(t, "after every ack", got.VGtid, pos(writers*each))
	})
}

// conflicting is a store on which every compare-and-swap finds another
// value: an update must give up, not loop.
type conflicting struct {
	store.Store
	swaps atomic.Int32
}

func (s *conflicting) CompareAndSwap(context.Context, string, string, []byte, []byte) (bool, error) {
	s.swaps.Add(1)
	return false, nil
}

func TestUpdateGivesUpUnderEndlessContention(t *testing.T) {
	st := &conflicting{Store: boltStore(t)}
	_, err := NewCursors(st).Ack(context.Background(), "orders", "alice", pos(10))
	if !errors.Is(err, ErrStateContended) {
		t.Fatalf("Ack on a store where every swap conflicts: %v, want ErrStateContended", err)
	}
	if n := st.swaps.Load(); n != maxStateAttempts {
		t.Fatalf("%d swaps tried, want %d", n, maxStateAttempts)
	}
}
