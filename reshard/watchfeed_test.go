package reshard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
)

var errTestRideEnded = errors.New("ride ended")

// chanFeed is a ride the test feeds: each value sent is one transaction,
// an error ends it.
type chanFeed struct {
	txns chan any
	once sync.Once
	done chan struct{}
}

func (f *chanFeed) Next(ctx context.Context) (*source.Txn, error) {
	select {
	case v := <-f.txns:
		if err, ok := v.(error); ok {
			return nil, err
		}
		return v.(*source.Txn), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *chanFeed) Close() { f.once.Do(func() { close(f.done) }) }

// A watcher rides a stream's tail when one covers its position: it opens
// no VStream of its own, records and hands on the journals the tail
// brings, and when the ride ends reads on its own no-row VStream from
// where the ride left it; once a tail runs again it rides again.
func TestWatcherRidesATail(t *testing.T) {
	st, reg, fake := resumeSetup(t)
	fake.SetTopology("ks", []string{"0"}, nil)
	saved, _ := position.Of(fakevtgate.VGtid("ks", "0", "MariaDB/0-1-10")).Marshal()
	if err := st.Put(context.Background(), positionNS, "ks", saved); err != nil {
		t.Fatal(err)
	}
	j, _ := FromEvent("ks", "0", &binlogdatapb.Journal{Id: 9, MigrationType: binlogdatapb.MigrationType_SHARDS,
		Participants:  []*binlogdatapb.KeyspaceShard{{Keyspace: "ks", Shard: "0"}},
		LocalPosition: "MariaDB/0-1-12",
		ShardGtids:    []*binlogdatapb.ShardGtid{{Keyspace: "ks", Shard: "-80", Gtid: "MariaDB/0-2-5"}, {Keyspace: "ks", Shard: "80-", Gtid: "MariaDB/0-3-5"}},
	})
	if _, err := reg.Record(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var rides []*chanFeed
	var from []*binlogdatapb.VGtid
	lend := true
	rider := func(ks string, pos *binlogdatapb.VGtid) (WatchFeed, string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if !lend || ks != "ks" {
			return nil, "", false
		}
		f := &chanFeed{txns: make(chan any, 4), done: make(chan struct{})}
		rides, from = append(rides, f), append(from, pos)
		return f, "orders", true
	}
	handed := runWatcherWith(t, st, reg, fake, func(w *Watcher) {
		WithTailRider(rider, errTestRideEnded)(w)
		w.rideCheck = 50 * time.Millisecond
	})
	ride := func(i int) *chanFeed {
		t.Helper()
		deadline := time.Now().Add(fakevtgate.Timeout)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := len(rides)
			mu.Unlock()
			if n > i {
				mu.Lock()
				defer mu.Unlock()
				return rides[i]
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("ride %d never started", i)
		return nil
	}
	first := ride(0)
	mu.Lock()
	start := from[0]
	mu.Unlock()
	sameVGtid(t, "the ride starts at", start, fakevtgate.VGtid("ks", "0", "MariaDB/0-1-10"))
	shard0 := fakevtgate.Shard{Keyspace: "ks", Name: "0"}
	for _, ev := range shard0.JournalTxn(9, []string{"0"}, "MariaDB/0-1-12",
		fakevtgate.VGtid("ks", "0", "MariaDB/0-1-12"), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5") {
		if ev.Journal != nil {
			first.txns <- &source.Txn{VGtid: fakevtgate.VGtid("ks", "0", "MariaDB/0-1-12"), Journal: ev.Journal, JournalDone: true}
		}
	}
	select {
	case got := <-handed:
		if got.Key != j.Key {
			t.Fatalf("handed on %s, want %s", got.Key, j.Key)
		}
	case <-time.After(fakevtgate.Timeout):
		t.Fatal("the journal the tail brought was not handed on")
	}
	if n := fake.Calls(); n != 0 {
		t.Fatalf("%d VStream calls while riding, want none", n)
	}

	// The tail stops: the watcher reads on its own VStream from the ride's
	// last position, and rides again once a tail is lent.
	mu.Lock()
	lend = false
	mu.Unlock()
	after := fakevtgate.VGtid("ks", "-80", "MariaDB/0-2-6", "80-", "MariaDB/0-3-5")
	first.txns <- &source.Txn{VGtid: after}
	first.txns <- errTestRideEnded
	sameVGtid(t, "its own VStream starts at", fake.Call(t, 0).Req.Vgtid, after)
	mu.Lock()
	lend = true
	mu.Unlock()
	ride(1)
	select {
	case <-fake.Call(t, 0).Done():
	case <-time.After(fakevtgate.Timeout):
		t.Fatal("the own VStream was not closed when a tail was ridden again")
	}
}
