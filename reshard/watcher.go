package reshard

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/lease"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// Watcher records reshard journals while no subscriber is connected
// (DESIGN §4 rule 2): for every served keyspace, exactly one gateway replica
// (by a store lease with fencing, held through a lease.Runner) streams from
// its saved position with a filter that selects no rows. vtgate still sends
// JOURNAL events, and the transactions the filter drops still move the
// position, so the watcher's position stays current and a replica taking
// over resumes where the last holder stopped: no journal is missed.
type Watcher struct {
	src       WatchOpener
	st        store.Store
	reg       *Registry
	keyspaces func(ctx context.Context) ([]string, error)
	onJournal func(ctx context.Context, j *Journal, l store.Lease)
	holder    string
	ttl       time.Duration
	every     time.Duration
	log       *slog.Logger

	// ride, when set, lends the watcher a running stream tail to read
	// instead of a VStream of its own (watchfeed.go).
	ride      TailRider
	rideEnded error
	rideCheck time.Duration // how often a watcher on its own VStream looks for a tail

	mu      sync.Mutex
	running map[string]bool // keyspace → this replica holds its lease (false: waiting for it)
}

// WatchOpener opens the no-row readers the watcher takes journals from,
// and tells which shards exist (to rebuild a saved position whose shards
// are gone); *source.Client is the production one.
type WatchOpener interface {
	Open(ctx context.Context, spec source.Spec, from *binlogdatapb.VGtid, opts ...source.ReadOption) *source.Reader
	Topology(ctx context.Context, keyspaces ...string) (source.Topology, error)
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
// complete (every participant's position recorded), by the lease holder,
// with the lease: what it writes for the journal (bridge spools) is fenced
// by it, so a holder that lost the lease mid-way cannot write beside the
// next one.
func NewWatcher(src WatchOpener, st store.Store, reg *Registry, holder string,
	keyspaces func(ctx context.Context) ([]string, error), onJournal func(ctx context.Context, j *Journal, l store.Lease), opts ...WatcherOption) *Watcher {
	w := &Watcher{src: src, st: st, reg: reg, holder: holder, keyspaces: keyspaces, onJournal: onJournal,
		ttl: 10 * time.Second, every: 2 * time.Second, log: slog.Default(), running: map[string]bool{}, rideCheck: defaultRideCheck}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Run supervises the watchers until ctx ends: it periodically looks for
// served keyspaces and, for each one it does not watch or wait for yet,
// starts a lease runner that waits for the keyspace's lease and streams
// while it holds it.
//
// A store error while renewing does not stop a watch: only the store
// saying the lease is gone, or no renewal succeeding before the lease may
// have expired, does (see package lease). Stopping at every failed renewal
// would reopen the VStream, and release the lease to another replica, at
// every store hiccup.
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
			if !running {
				w.running[ks] = false
			}
			w.mu.Unlock()
			if running {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The runner logs and counts losses; a watch that ends for
				// any reason is started again at the next scan.
				_ = w.runner(ks).Run(ctx, func(ctx context.Context, l store.Lease) error {
					w.setHolding(ks, true)
					w.watch(ctx, ks, l)
					w.setHolding(ks, false)
					return nil
				})
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

// runner holds the lease of keyspace. It asks for a held lease as often as
// the keyspaces are listed, so a replica takes over from a dead one within
// the lease time plus a scan interval.
func (w *Watcher) runner(ks string) *lease.Runner {
	return lease.New(w.st, leaseName(ks), w.holder, w.ttl,
		lease.WithKind(metrics.LeaseJournalWatcher), lease.WithLogger(w.log.With("keyspace", ks)),
		lease.WithRetry(max(w.every/4, time.Millisecond), max(w.every, time.Millisecond)))
}

func (w *Watcher) setHolding(ks string, holding bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[ks] = holding
}

// Watching lists the keyspaces this replica watches now.
func (w *Watcher) Watching() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.running))
	for ks, holding := range w.running {
		if holding {
			out = append(out, ks)
		}
	}
	return out
}

func leaseName(keyspace string) string { return "watcher/" + keyspace }

const positionNS = "watcher-positions"

// watch streams keyspace under lease l until ctx ends (the lease is lost
// or the watcher stops) or the stream fails; every position it saves is
// fenced with l's token.
func (w *Watcher) watch(ctx context.Context, ks string, l store.Lease) {
	log := w.log.With("keyspace", ks, "holder", w.holder, "token", l.Token)
	log.Info("journal watcher started")
	defer log.Info("journal watcher stopped")

	from, err := w.resumeFrom(ctx, ks, l, log)
	if err != nil {
		log.Warn("journal watcher: resuming failed; trying again", "err", err)
		return
	}
	feed := w.openFeed(ctx, ks, from, log)
	defer feed.close()
	var saved time.Time
	for {
		txn, err := feed.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if _, shard, ok := source.MissingShard(err); ok {
				// A shard was deleted under the stream: the next start
				// rebuilds the saved position from recorded journals,
				// or records the gap (resume.go). Never the live end
				// in silence: that steps over a cutover's journal.
				log.Warn("journal watcher position is on a deleted shard; rebuilding it", "shard", shard, "err", err)
			} else {
				log.Warn("journal watcher stream failed; restarting", "err", err)
			}
			return
		}
		if txn.Journal != nil {
			w.journal(ctx, ks, txn.Journal, l, log)
		}
		if txn.Heartbeat && time.Since(saved) < time.Second {
			continue
		}
		if time.Since(saved) >= time.Second || txn.Journal != nil {
			b, _ := position.Of(txn.VGtid).Marshal()
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
func (w *Watcher) journal(ctx context.Context, ks string, raw *binlogdatapb.Journal, l store.Lease, log *slog.Logger) {
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
	w.onJournal(ctx, j, l)
}
