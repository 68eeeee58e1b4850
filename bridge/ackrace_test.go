package bridge

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// interleave is a store on which a competing write lands between a read
// of a subscriber's state and what its reader does next: the read returns
// the state as it was, then the competing write runs (through the same
// store, the hook disarmed), then the reader goes on. That is the order
// two replicas (or two goroutines of one) can run in at any time; here it
// is the only one.
type interleave struct {
	store.Store
	spooled atomic.Bool // a spool was appended to

	mu   sync.Mutex
	when func(ns, key string) bool
	then func()
	ran  bool
}

// arm makes the first read of a subscriber state for which when holds run
// then before it returns.
func (s *interleave) arm(when func(ns, key string) bool, then func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.when, s.then = when, then
}

func (s *interleave) Get(ctx context.Context, ns, key string) ([]byte, error) {
	v, err := s.Store.Get(ctx, ns, key)
	s.mu.Lock()
	then := s.then
	if then == nil || !strings.HasPrefix(ns, "subscribers/") || !s.when(ns, key) {
		s.mu.Unlock()
		return v, err
	}
	s.when, s.then, s.ran = nil, nil, true
	s.mu.Unlock()
	then()
	return v, err
}

func (s *interleave) Append(ctx context.Context, log string, vals ...[]byte) (uint64, error) {
	if strings.HasPrefix(log, "spool/") && len(vals) > 0 {
		s.spooled.Store(true)
	}
	return s.Store.Append(ctx, log, vals...)
}

// fired fails the test unless the competing write ran.
func (s *interleave) fired(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ran {
		t.Fatal("the competing write never ran: the test did not interleave anything")
	}
}

func alice(_, key string) bool { return key == "alice" }

// ackRaceEnv is an env on an interleaving store over st, with journal 7
// recorded, alice at pos(10) and her old-shard events scripted for a
// bridge: rows 1 (pos 11) and 2 3 (pos 13) before the cutover.
func ackRaceEnv(t *testing.T, st store.Store) (*env, *interleave) {
	t.Helper()
	is := &interleave{Store: st}
	e := newEnvOn(t, is)
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
		s0.Txn(100, pos(13), row(s0, "2"), row(s0, "3")),
	}, journalEnd()...)})
	return e, is
}

// readAfterReshard opens alice once the old shard is gone and checks she
// gets want (the spool's rest, the notice, the new shards' first row).
func readAfterReshard(t *testing.T, e *env, want ...string) {
	t.Helper()
	e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
	e.fake.Push(liveOnNewShards())
	s := e.open(t, hub.From{Subscriber: "alice"})
	for _, w := range want {
		if got := summary(t, next(t, s).Txn); got != w {
			t.Fatalf("alice after the reshard: %q, want %q (all: %q)", got, w, want)
		}
	}
}

// An ack read alice's state, then a bridge recorded her spool, then the
// ack wrote: the ack must keep the bridge (it wrote the state it had read,
// without it, and alice got a resync after the reshard). The same for a
// lease holder's fenced ack (a webhook's).
func TestAckKeepsAConcurrentBridge(t *testing.T) {
	acks := map[string]func(t *testing.T, e *env){
		"ack": func(t *testing.T, e *env) { e.ack(t, "alice", pos(11)) },
		"fenced": func(t *testing.T, e *env) {
			l, err := e.st.AcquireLease(context.Background(), "deliver", "me", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.hub.Cursors().AckFenced(context.Background(), e.def.Name, "alice", pos(11), l.Name, l.Token); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, ack := range acks {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st store.Store) {
				e, is := ackRaceEnv(t, st)
				j := e.recordJournal(t)
				is.arm(alice, func() {
					if bs, err := e.br.Subscriber(context.Background(), e.def, "alice", j); err != nil || bs.State != "done" {
						t.Errorf("Subscriber: %+v, %v", bs, err)
					}
				})
				ack(t, e)
				is.fired(t)
				ackedAndBridged(t, e)
			})
		})
	}
}

// A bridge read alice's state to record her spool, then she acked, then
// the bridge wrote: the ack must stand (the bridge wrote the cursor it had
// read, moving hers back: repeats), and the bridge too, which still
// carries her from where she acked.
func TestBridgeKeepsAConcurrentAck(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		e, is := ackRaceEnv(t, st)
		j := e.recordJournal(t)
		// The bridge's read after its capture: the spool is written.
		is.arm(func(_, key string) bool { return key == "alice" && is.spooled.Load() }, func() {
			e.ack(t, "alice", pos(11))
		})
		if bs, err := e.br.Subscriber(context.Background(), e.def, "alice", j); err != nil || bs.State != "done" {
			t.Fatalf("Subscriber: %+v, %v", bs, err)
		}
		is.fired(t)
		ackedAndBridged(t, e)
	})
}

// ackedAndBridged checks that alice's ack at pos(11) and her bridge both
// stand: she reads the rest of her spool, the cutover, the new shards.
func ackedAndBridged(t *testing.T, e *env) {
	t.Helper()
	sub, err := e.hub.Cursors().Get(context.Background(), e.def.Name, "alice")
	if err != nil {
		t.Fatal(err)
	}
	samePos(t, "alice's cursor", sub.VGtid, pos(11))
	if len(sub.Bridges) != 1 {
		t.Fatalf("alice has %d bridges after an ack beside her bridge, want 1", len(sub.Bridges))
	}
	readAfterReshard(t, e, "2 3", "reshard", "4")
}

// A subscription opened with alice's state (bridged, acked past her
// bridge) frees the bridge; an ack that lands between that read and the
// freeing must stand.
func TestFreeingBridgesKeepsAConcurrentAck(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		e, is := ackRaceEnv(t, st)
		j := e.recordJournal(t)
		bridge(t, e, j)
		e.ack(t, "alice", after5)
		later := fakevtgate.VGtid(ks, "-80", "MariaDB/0-2-7", "80-", "MariaDB/0-3-5")
		is.arm(alice, func() { e.ack(t, "alice", later) })
		e.fake.SetTopology(ks, []string{"-80", "80-"}, nil)
		e.fake.Push(liveOnNewShards())
		next(t, e.open(t, hub.From{Subscriber: "alice"}))
		is.fired(t)
		sub, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(sub.VGtid, later) || len(sub.Bridges) != 0 {
			t.Fatalf("alice after freeing her bridge: %v with %d bridges, want %v and none", sub.VGtid, len(sub.Bridges), later)
		}
	})
}

// A subscriber online across a cutover is bridged while it reads on from
// the tail, then acks past the bridge's end: the ack frees the bridge (no
// plan runs at its cursor to do it), so a later reshard's bridge starts at
// the acked cursor, not at the first bridge's end, and spools nothing it
// acked. Seen in the soak: the merge's spool held every row of -80,80-
// since the split, and the subscriber got them again.
func TestAckPastABridgeFreesIt(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	j := e.recordJournal(t)
	e.fake.SetTopology(ks, []string{"-80", "80-"}, []string{"0"})
	e.ack(t, "alice", pos(10))
	e.fake.Push(fakevtgate.Script{Batches: append([][]*binlogdatapb.VEvent{
		s0.Txn(100, pos(11), field(s0), row(s0, "1")),
	}, journalEnd()...)})
	bridge(t, e, j)

	e.ack(t, "alice", after5) // read on from the tail, past the bridge
	st, err := e.hub.Cursors().Get(ctx, e.def.Name, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Bridges) != 0 || len(st.Freed) != 1 || st.Freed[0].FreedAt.IsZero() {
		t.Fatalf("after an ack past the bridge: %d bridges, %d freed (%+v); want it freed", len(st.Bridges), len(st.Freed), st.Freed)
	}
	eff, err := st.EffectivePosition()
	if err != nil {
		t.Fatal(err)
	}
	samePos(t, "a later bridge starts at", eff, after5)
}
