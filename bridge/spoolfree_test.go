package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// putState stores st as its subscriber's state, whatever is stored, as the
// hub stores states (JSON under subscribers/<stream>), and checks that the
// hub reads back what was put.
func putState(t *testing.T, e *env, st *hub.SubscriberState) {
	t.Helper()
	ctx := context.Background()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Put(ctx, "subscribers/"+e.def.Name, st.Name, raw); err != nil {
		t.Fatal(err)
	}
	got, err := e.hub.Cursors().Get(ctx, e.def.Name, st.Name)
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := json.Marshal(got); !bytes.Equal(back, raw) {
		t.Fatalf("the hub reads the state put as %s, want %s", back, raw)
	}
}

// longSpool is more transactions than a spool reader reads in one page:
// a reader in the middle of it has the rest still to read from the store.
const longSpool = hub.SpoolPage + 44

// longBridge bridges alice (acked at pos(10)) across a cutover at
// gtid(1000) with a spool of longSpool one-row transactions, ids 1 to
// longSpool at pos(11) on, and deletes the old shard. It returns the
// spool's log.
func longBridge(t *testing.T, e *env) string {
	t.Helper()
	j, ok := reshard.FromEvent(ks, "0", &binlogdatapb.Journal{Id: 7, MigrationType: binlogdatapb.MigrationType_SHARDS,
		LocalPosition: gtid(1000), ShardGtids: targets.ShardGtids,
		Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: ks, Shard: "0"}}})
	if !ok {
		t.Fatal("not a reshard journal")
	}
	j = e.record(t, j)
	e.ack(t, "alice", pos(10))
	batches := [][]*binlogdatapb.VEvent{s0.Txn(100, pos(11), field(s0), row(s0, "1"))}
	for id := 2; id <= longSpool; id++ {
		batches = append(batches, s0.Txn(100, pos(10+id), row(s0, strconv.Itoa(id))))
	}
	batches = append(batches, s0.JournalTxn(7, []string{"0"}, gtid(1000), pos(1001), "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"))
	e.fake.Push(fakevtgate.Script{Batches: batches})
	if st, err := e.br.Subscriber(context.Background(), e.def, "alice", j); err != nil || st.State != "done" {
		t.Fatalf("Subscriber: %+v, %v", st, err)
	}
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	sub, err := e.hub.Cursors().Get(context.Background(), e.def.Name, "alice")
	if err != nil || len(sub.Bridges) != 1 {
		t.Fatalf("alice after the bridge: %+v, %v", sub, err)
	}
	return sub.Bridges[0].Log
}

// readRows reads deliveries from s and checks they are ids from to to, in
// order, one a delivery.
func readRows(t *testing.T, s *hub.Subscription, from, to int) {
	t.Helper()
	for id := from; id <= to; id++ {
		if got := summary(t, next(t, s).Txn); got != strconv.Itoa(id) {
			t.Fatalf("reading the spool: %q, want row %d", got, id)
		}
	}
}

// ackPastAndReconnect is alice's first reader finishing: it acks past the
// spool and connects again, which frees the bridge (its cursor is past
// it), and gets the new shards' first row.
func ackPastAndReconnect(t *testing.T, e *env) {
	t.Helper()
	e.ack(t, "alice", after5)
	e.fake.Push(liveOnNewShards())
	s := e.open(t, hub.From{Subscriber: "alice"})
	if got := summary(t, next(t, s).Txn); got != "4" {
		t.Fatalf("alice's first reader after acking past the spool: %q, want 4", got)
	}
	s.Close()
}

// Two readers of one subscriber (two tabs, two replicas) replay its spool;
// the first acks past it and reconnects, which frees the bridge. The
// second, in the middle of the spool, must get the rest of it: the spool
// was deleted under it, and a deleted spool read as its end, so it went
// on at the new shards without the rows it had not read yet.
func TestSpoolOutlivesItsBridgeForOtherReaders(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvOn(t, st)
		longBridge(t, e)
		second := e.open(t, hub.From{Subscriber: "alice"})
		readRows(t, second, 1, 10)
		ackPastAndReconnect(t, e)
		readRows(t, second, 11, longSpool)
		if got := summary(t, next(t, second).Txn); got != "reshard" {
			t.Fatalf("at the spool's end: %q, want the reshard notice", got)
		}
		e.fake.Push(liveOnNewShards())
		if got := summary(t, next(t, second).Txn); got != "4" {
			t.Fatalf("after the spool: %q, want 4", got)
		}
	})
}

// A cursor inside a freed bridge's spool (a pull page of alice's second
// reader, presented on another replica once the first freed the bridge)
// still resumes in the spool while it is kept: the bridge left alice's
// chain, not the store.
func TestCursorInsideAFreedSpool(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		e := newEnvOn(t, st)
		longBridge(t, e)
		ackPastAndReconnect(t, e)
		if sub, err := e.hub.Cursors().Get(context.Background(), e.def.Name, "alice"); err != nil || len(sub.Bridges) != 0 || len(sub.Freed) != 1 {
			t.Fatalf("alice after acking past her bridge: %+v, %v; want it freed", sub, err)
		}
		s := e.open(t, hub.From{Token: e.token(t, pos(15)), Subscriber: "alice"})
		readRows(t, s, 6, 8)
	})
}

// A reader still on a spool when it is deleted (freed, and its grace
// passed) fails with ErrSpoolGone instead of going on past the rows it did
// not read; connected again it resumes from the subscriber's cursor, past
// the spool: nothing lost (the subscriber acked it) and nothing repeated.
// The same for a bridge recorded before bridges kept their spool's last
// sequence number.
func TestDeletedSpoolFailsItsReader(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "bridge"
		if legacy {
			name = "bridge without seq"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st store.Store) {
				ctx := context.Background()
				e := newEnvOn(t, st)
				log := longBridge(t, e)
				if legacy {
					sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
					if err != nil {
						t.Fatal(err)
					}
					sub.Bridges[0].Seq = 0
					putState(t, e, sub)
				}
				second := e.open(t, hub.From{Subscriber: "alice"})
				readRows(t, second, 1, 10)
				e.hub = e.hubWith(t, hub.WithSpoolGrace(0)) // plans after the grace
				ackPastAndReconnect(t, e)                   // frees the bridge
				ackPastAndReconnect(t, e)                   // deletes its spool, the grace over
				if n, err := e.st.LogLen(ctx, log); err != nil || n != 0 {
					t.Fatalf("spool holds %d entries (%v) after the grace, want it deleted", n, err)
				}
				// What the reader had read from the store it delivers; then
				// it fails.
				readRows(t, second, 11, hub.SpoolPage)
				nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if d, err := second.Next(nctx); !errors.Is(err, hub.ErrSpoolGone) {
					t.Fatalf("reading on from a deleted spool: %v, %v; want ErrSpoolGone", d, err)
				}
				e.fake.Push(liveOnNewShards())
				if got := summary(t, next(t, e.open(t, hub.From{Subscriber: "alice"})).Txn); got != "4" {
					t.Fatalf("the reader connected again: %q, want 4", got)
				}
				samePos(t, "the reader connected again", e.fake.Call(t, e.fake.Calls()-1).Req.Vgtid, after5)
			})
		})
	}
}
