package reshard

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/internal/fakevtgate"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

// resumeSetup is a keyspace ks split 0 → -80,80- and completed (shard 0
// deleted) while the watcher's saved position was on 0, at the journal's
// local position. It returns the store, the registry and a fake vtgate
// whose first VStream stays open.
func resumeSetup(t *testing.T) (store.Store, *Registry, *fakevtgate.Server) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	saved, _ := position.Of(fakevtgate.VGtid("ks", "0", "MariaDB/0-1-20")).Marshal()
	if err := st.Put(context.Background(), positionNS, "ks", saved); err != nil {
		t.Fatal(err)
	}
	fake := fakevtgate.New(t)
	fake.SetTopology("ks", []string{"-80", "80-"}, nil)
	fake.Push(fakevtgate.Script{Open: true})
	return st, NewRegistry(st), fake
}

// runWatcher runs a watcher of ks over fake until the test ends; journals
// handed on for bridging are sent to the returned channel.
func runWatcher(t *testing.T, st store.Store, reg *Registry, fake *fakevtgate.Server) <-chan *Journal {
	t.Helper()
	return runWatcherWith(t, st, reg, fake, nil)
}

// runWatcherWith is runWatcher with set applied to the watcher first.
func runWatcherWith(t *testing.T, st store.Store, reg *Registry, fake *fakevtgate.Server, set func(*Watcher)) <-chan *Journal {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	src, err := source.Dial(ctx, fake.Addr, source.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	handed := make(chan *Journal, 4)
	w := NewWatcher(src, st, reg, "a",
		func(context.Context) ([]string, error) { return []string{"ks"}, nil },
		func(_ context.Context, j *Journal, _ store.Lease) { handed <- j }, WithWatcherLogger(quiet))
	if set != nil {
		set(w)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return handed
}

func sameVGtid(t *testing.T, what string, got, want *binlogdatapb.VGtid) {
	t.Helper()
	if !position.Of(got).Identical(position.Of(want)) {
		t.Fatalf("%s: %v, want %v", what, position.Of(got), position.Of(want))
	}
}

// A watcher whose saved position is on a deleted shard continues exactly
// from the journal a reader recorded: it streams the journal's targets
// from their positions (not the live end, which would step over any later
// journal) and hands the journal on for bridging.
func TestWatcherRebuildsItsPositionFromRecordedJournals(t *testing.T) {
	st, reg, fake := resumeSetup(t)
	j, _ := FromEvent("ks", "0", &binlogdatapb.Journal{Id: 7, MigrationType: binlogdatapb.MigrationType_SHARDS,
		Participants:  []*binlogdatapb.KeyspaceShard{{Keyspace: "ks", Shard: "0"}},
		LocalPosition: "MariaDB/0-1-20",
		ShardGtids:    []*binlogdatapb.ShardGtid{{Keyspace: "ks", Shard: "-80", Gtid: "MariaDB/0-2-5"}, {Keyspace: "ks", Shard: "80-", Gtid: "MariaDB/0-3-5"}},
	})
	if _, err := reg.Record(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	handed := runWatcher(t, st, reg, fake)
	sameVGtid(t, "the watcher's VStream starts at", fake.Call(t, 0).Req.Vgtid,
		fakevtgate.VGtid("ks", "-80", "MariaDB/0-2-5", "80-", "MariaDB/0-3-5"))
	select {
	case got := <-handed:
		if got.Key != j.Key {
			t.Fatalf("handed on journal %s, want %s", got.Key, j.Key)
		}
	case <-time.After(fakevtgate.Timeout):
		t.Fatal("the journal followed was not handed on for bridging")
	}
	if gaps, err := reg.Gaps(context.Background(), "ks"); err != nil || len(gaps) != 0 {
		t.Fatalf("gaps %v, %v; want none", gaps, err)
	}
}

// A watcher whose saved position is on a deleted shard that no recorded
// journal continues says so: the gap is recorded with its shards, counted
// and logged, and only then does the watcher go on from the current
// position.
func TestWatcherRecordsAJournalItMissed(t *testing.T) {
	st, reg, fake := resumeSetup(t)
	before := journalGaps(t, "ks")
	runWatcher(t, st, reg, fake)
	sameVGtid(t, "the watcher's VStream starts at", fake.Call(t, 0).Req.Vgtid, source.NowPosition("ks"))
	gaps, err := reg.Gaps(context.Background(), "ks")
	if err != nil || len(gaps) != 1 {
		t.Fatalf("gaps %v, %v; want one", gaps, err)
	}
	g := gaps[0]
	if len(g.Missing) != 1 || g.Missing[0] != "ks/0" || len(g.Serving) != 2 || g.Holder != "a" || g.From == "" {
		t.Fatalf("gap %+v", g)
	}
	if v := journalGaps(t, "ks") - before; v != 1 {
		t.Fatalf("vsg_journal_gaps_total{keyspace=ks} grew by %v, want 1", v)
	}
	if err := reg.DismissGap(context.Background(), "ks", g.ID); err != nil {
		t.Fatal(err)
	}
	if err := reg.DismissGap(context.Background(), "ks", g.ID); err == nil {
		t.Fatal("a gap dismissed twice: no error")
	}
}

// journalGaps reads vsg_journal_gaps_total{keyspace}.
func journalGaps(t *testing.T, ks string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vsg_journal_gaps_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "keyspace" && l.GetValue() == ks {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
