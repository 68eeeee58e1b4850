package reshard

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// Watcher records reshard journals while no subscriber is connected
// (DESIGN §4 rule 2): for every served keyspace, exactly one gateway replica
// (by a store lease with fencing) streams from its saved position with a
// filter that selects no rows. vtgate still sends JOURNAL events, and the
// transactions the filter drops still move the position, so the watcher's
// position stays current and a replica taking over resumes where the last
// holder stopped: no journal is missed.
type Watcher struct {
	src       WatchOpener
	st        store.Store
	reg       *Registry
	keyspaces func(ctx context.Context) ([]string, error)
	onJournal func(ctx context.Context, j *Journal)
	holder    string
	ttl       time.Duration
	every     time.Duration
	log       *slog.Logger

	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// WatchOpener opens the no-row readers the watcher takes journals from;
// *source.Client is the production one.
type WatchOpener interface {
	Open(ctx context.Context, spec source.Spec, from *binlogdatapb.VGtid, opts ...source.ReadOption) *source.Reader
}

// noRows is a rule matching no table: vtgate sends journals and positions
// but no rows. (A `where` that is false for every row is not safe: vttablet
// rejects `1 != 1` or `id = -1` at the first row and kills the stream.)
var noRows = []*binlogdatapb.Rule{{Match: "__vsgw_none__"}}

// WatcherOption configures a Watcher.
type WatcherOption func(*Watcher)

// WithLeaseTTL sets the watcher lease time (default 10s).
func WithLeaseTTL(d time.Duration) WatcherOption { return func(w *Watcher) { w.ttl = d } }

// WithWatcherLogger sets the logger.
func WithWatcherLogger(l *slog.Logger) WatcherOption { return func(w *Watcher) { w.log = l } }

// NewWatcher returns a watcher. keyspaces lists the keyspaces to watch
// (those of defined streams); onJournal is called once a journal is
// complete (every participant's position recorded), by the lease holder.
func NewWatcher(src WatchOpener, st store.Store, reg *Registry, holder string,
	keyspaces func(ctx context.Context) ([]string, error), onJournal func(ctx context.Context, j *Journal), opts ...WatcherOption) *Watcher {
	w := &Watcher{src: src, st: st, reg: reg, holder: holder, keyspaces: keyspaces, onJournal: onJournal,
		ttl: 10 * time.Second, every: 2 * time.Second, log: slog.Default(), running: map[string]context.CancelFunc{}}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Run supervises the watchers until ctx ends: it periodically looks for
// served keyspaces and tries to take the lease of those nobody watches.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		kss, err := w.keyspaces(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("journal watcher: listing keyspaces failed", "err", err)
		}
		for _, ks := range kss {
			w.mu.Lock()
			_, running := w.running[ks]
			w.mu.Unlock()
			if running {
				continue
			}
			lease, err := w.st.AcquireLease(ctx, leaseName(ks), w.holder, w.ttl)
			if err != nil {
				if !errors.Is(err, store.ErrLeaseHeld) && ctx.Err() == nil {
					w.log.Warn("journal watcher: lease", "keyspace", ks, "err", err)
				}
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			w.mu.Lock()
			w.running[ks] = cancel
			w.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.watch(wctx, ks, lease)
				cancel()
				w.mu.Lock()
				delete(w.running, ks)
				w.mu.Unlock()
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Watching lists the keyspaces this replica watches now.
func (w *Watcher) Watching() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.running))
	for ks := range w.running {
		out = append(out, ks)
	}
	return out
}

func leaseName(keyspace string) string { return "watcher/" + keyspace }

const positionNS = "watcher-positions"

// watch holds the lease of keyspace and streams until the lease is lost or
// ctx ends.
func (w *Watcher) watch(ctx context.Context, ks string, lease store.Lease) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := w.log.With("keyspace", ks, "holder", w.holder, "token", lease.Token)
	log.Info("journal watcher started")
	defer log.Info("journal watcher stopped")

	var mu sync.Mutex // guards lease
	go func() {
		t := time.NewTicker(w.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				mu.Lock()
				w.st.ReleaseLease(context.WithoutCancel(ctx), lease)
				mu.Unlock()
				return
			case <-t.C:
			}
			mu.Lock()
			l, err := w.st.RenewLease(ctx, lease, w.ttl)
			if err == nil {
				lease = l
			}
			mu.Unlock()
			if err != nil {
				log.Warn("journal watcher lost its lease", "err", err)
				cancel()
				return
			}
		}
	}()

	from := source.StartNow(ks)
	if b, err := w.st.Get(ctx, positionNS, ks); err == nil {
		v := &binlogdatapb.VGtid{}
		if proto.Unmarshal(b, v) == nil && len(v.ShardGtids) > 0 {
			from = v
		}
	}
	r := w.src.Open(ctx, source.Spec{Name: "journal-watcher/" + ks, Keyspace: ks, Rules: noRows}, from)
	defer r.Close()
	var saved time.Time
	for {
		txn, err := r.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if _, shard, ok := source.MissingShard(err); ok {
				// The saved position is on a shard deleted while nobody
				// watched (longer than the lease time): start again from
				// the current position. Journals in between were seen
				// only if some subscriber's stream crossed them.
				log.Error("journal watcher position is on a deleted shard; restarting from the current position", "shard", shard, "err", err)
				w.st.Delete(ctx, positionNS, ks)
			} else {
				log.Warn("journal watcher stream failed; restarting", "err", err)
			}
			return
		}
		if txn.Journal != nil {
			w.journal(ctx, ks, txn.Journal, log)
		}
		if txn.Heartbeat && time.Since(saved) < time.Second {
			continue
		}
		if time.Since(saved) >= time.Second || txn.Journal != nil {
			b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(txn.VGtid)
			mu.Lock()
			l := lease
			mu.Unlock()
			if err := w.st.PutFenced(ctx, positionNS, ks, b, l.Name, l.Token); err != nil {
				log.Warn("journal watcher position not saved", "err", err)
				if errors.Is(err, store.ErrFenced) {
					return
				}
			}
			saved = time.Now()
		}
	}
}

// journal records a journal seen by the watcher and, once every
// participant's view is in, hands it on for bridging.
func (w *Watcher) journal(ctx context.Context, ks string, raw *binlogdatapb.Journal, log *slog.Logger) {
	rec, ok := FromEvent(ks, "", raw)
	if !ok {
		return
	}
	j, err := w.reg.Get(ctx, ks, rec.Key)
	if err != nil {
		log.Warn("journal not in the registry yet", "journal", rec.Key, "err", err)
		return
	}
	if !j.Complete() {
		return // another participant's JOURNAL follows
	}
	log.Info("reshard journal complete", "journal", j.Key, "id", j.ID, "from", j.From(), "to", j.To())
	w.onJournal(ctx, j)
}
