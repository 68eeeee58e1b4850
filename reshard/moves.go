package reshard

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	topodatapb "vitess.io/vitess/go/vt/proto/topodata"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// MoveReader is what the Mover needs from vtctld; *Vtctld is the
// production one.
type MoveReader interface {
	RoutedTables(ctx context.Context) (map[string]bool, error)
	Primaries(ctx context.Context, keyspace string) (map[string]*topodatapb.TabletAlias, error)
	JournalRows(ctx context.Context, alias *topodatapb.TabletAlias, dbName string) ([][]byte, error)
}

// Mover finds MoveTables cutovers (DESIGN §4.1). It watches vtctld's
// routing rules (a workflow's tables appear there at create and leave at
// complete) and reads the journals of the served keyspaces' primaries when
// the rules change, on demand (Sync) and on a timer. Every MoveTables
// journal is recorded in the Registry; one that is new and complete is
// handed to onMove, which moves the streams whose tables it carries.
//
// Readers of a keyspace whose tables a workflow moves (Pending) must not
// deliver a transaction before a journal read that began after it arrived
// has finished (Sync): after SwitchTraffic the reverse workflow copies
// every row written on the target back into the source, and only the
// journal says where the source's own rows end.
type Mover struct {
	vt        MoveReader
	reg       *Registry
	st        store.Store
	keyspaces func(ctx context.Context) ([]string, error)
	onMove    func(ctx context.Context, j *Journal) error
	log       *slog.Logger
	every     time.Duration
	scanEvery time.Duration

	mu      sync.Mutex
	routed  map[string]bool // "keyspace.table" named by routing rules, last read
	runSeen map[string]bool // the rules Run last compared against
	rules   *scan           // the routing-rules read in progress or last done (Fresh)
	scans   map[string]*scan
	handled map[string]bool // journal keys onMove accepted
}

// scan is the journal read of one keyspace in progress or last done.
type scan struct {
	started time.Time
	done    chan struct{}
	err     error
}

// MoverOption configures a Mover.
type MoverOption func(*Mover)

// WithMoverLogger sets the logger.
func WithMoverLogger(l *slog.Logger) MoverOption { return func(m *Mover) { m.log = l } }

// WithMoverIntervals sets how often the routing rules are read and how
// often the journals are read without a reason.
func WithMoverIntervals(rules, journals time.Duration) MoverOption {
	return func(m *Mover) { m.every, m.scanEvery = rules, journals }
}

// NewMover returns a mover. keyspaces lists the keyspaces streams read;
// onMove is called for every new complete MoveTables journal (again after
// it returned an error).
func NewMover(vt MoveReader, reg *Registry, st store.Store, keyspaces func(ctx context.Context) ([]string, error),
	onMove func(ctx context.Context, j *Journal) error, opts ...MoverOption) *Mover {
	m := &Mover{vt: vt, reg: reg, st: st, keyspaces: keyspaces, onMove: onMove, log: slog.Default(),
		every: time.Second, scanEvery: 10 * time.Second, scans: map[string]*scan{}, handled: map[string]bool{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Run reads the routing rules every interval and the served keyspaces'
// journals when they change and on the slower timer, until ctx ends.
func (m *Mover) Run(ctx context.Context) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	var lastScan time.Time
	for {
		changed := false
		if routed, err := m.readRules(ctx); err != nil {
			if ctx.Err() == nil {
				m.log.Warn("MoveTables watch: reading routing rules failed", "err", err)
			}
		} else {
			// Fresh reads update the rules too: compare with what this
			// loop saw last, so that no change escapes the journal read.
			m.mu.Lock()
			changed = !maps.Equal(routed, m.runSeen)
			m.runSeen = routed
			m.mu.Unlock()
		}
		if changed || time.Since(lastScan) >= m.scanEvery {
			lastScan = time.Now()
			kss, err := m.keyspaces(ctx)
			if err != nil && ctx.Err() == nil {
				m.log.Warn("MoveTables watch: listing keyspaces failed", "err", err)
			}
			for _, ks := range kss {
				if err := m.Sync(ctx, ks, time.Now()); err != nil && ctx.Err() == nil {
					m.log.Warn("MoveTables watch: reading journals failed", "keyspace", ks, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readRules reads the routing rules and makes them Pending's view.
func (m *Mover) readRules(ctx context.Context) (map[string]bool, error) {
	routed, err := m.vt.RoutedTables(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.routed = routed
	m.mu.Unlock()
	return routed, nil
}

// Fresh returns once a routing-rules read that began at or after `after`
// has finished (Pending then answers from it). A reader calls it when it
// sees a trace of a possible switch the 1 s poll may not have caught
// (DESIGN §4.1 rule 4): a workflow created and switched between two polls
// would otherwise escape the gate. Reads are shared by all callers, one
// at a time, at most one per freshGap, and run detached from the caller
// that started them.
func (m *Mover) Fresh(ctx context.Context, after time.Time) error {
	for {
		m.mu.Lock()
		s := m.rules
		if s == nil || s.started.Before(after) && isDone(s) {
			start := time.Now()
			if s != nil && start.Before(s.started.Add(freshGap)) {
				start = s.started.Add(freshGap)
			}
			s = &scan{started: start, done: make(chan struct{})}
			m.rules = s
			go func() {
				time.Sleep(time.Until(s.started)) // at most freshGap
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), vtctldTimeout)
				defer cancel()
				_, s.err = m.readRules(rctx)
				close(s.done)
			}()
		}
		m.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !s.started.Before(after) {
			return s.err
		}
	}
}

// freshGap spaces the routing-rules reads Fresh makes: on a busy keyspace
// every transaction after a trace asks for one, and vtctld reads the
// topology server for each.
const freshGap = 50 * time.Millisecond

// Pending reports whether the routing rules name one of tables of
// keyspace: a MoveTables workflow moves it, to or from keyspace.
func (m *Mover) Pending(keyspace string, tables []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range tables {
		if m.routed[keyspace+"."+t] {
			return true
		}
	}
	return false
}

// Completed reports whether no workflow moves tables of keyspace any
// more: the routing rules, read now, name none of them. A MoveTables
// `complete` removes its rules with the source tables; while a workflow
// runs (or after ReverseTraffic) its rules name both sides.
func (m *Mover) Completed(ctx context.Context, keyspace string, tables []string) (bool, error) {
	routed, err := m.vt.RoutedTables(ctx)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		if routed[keyspace+"."+t] {
			return false, nil
		}
	}
	return true, nil
}

// Sync returns once a journal read of keyspace that began at or after
// `after` has finished, and any new cutover it found has been handed to
// onMove. Concurrent callers share reads. A read runs detached from the
// caller that started it (bounded by scanTimeout): a caller that gives up
// must not fail the read for the others waiting on it.
func (m *Mover) Sync(ctx context.Context, keyspace string, after time.Time) error {
	for {
		m.mu.Lock()
		s := m.scans[keyspace]
		if s == nil || s.started.Before(after) && isDone(s) {
			s = &scan{started: time.Now(), done: make(chan struct{})}
			m.scans[keyspace] = s
			go func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scanTimeout)
				defer cancel()
				s.err = m.scan(sctx, keyspace)
				close(s.done)
			}()
		}
		m.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !s.started.Before(after) {
			return s.err
		}
	}
}

// scanTimeout bounds one journal read of a keyspace (a few vtctld calls of
// vtctldTimeout each).
const scanTimeout = 30 * time.Second

func isDone(s *scan) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func scannedNS() string { return "movetables-scanned" }

// scan reads the journals of keyspace's primaries, records the MoveTables
// ones and hands the new complete ones to onMove.
func (m *Mover) scan(ctx context.Context, keyspace string) error {
	prim, err := m.vt.Primaries(ctx, keyspace)
	if err != nil {
		return err
	}
	// The first read of a keyspace finds the cutovers of its past; they
	// are recorded (a cursor may need them) but moved no stream.
	_, err = m.st.Get(ctx, scannedNS(), keyspace)
	first := errors.Is(err, store.ErrNotFound)
	if err != nil && !first {
		return err
	}
	found := map[string]bool{}
	for _, shard := range slices.Sorted(maps.Keys(prim)) {
		rows, err := m.vt.JournalRows(ctx, prim[shard], "vt_"+keyspace)
		if err != nil {
			return err
		}
		for _, val := range rows {
			raw, err := DecodeJournal(val)
			if err != nil {
				m.log.Warn("unreadable resharding journal row", "keyspace", keyspace, "shard", shard, "err", err)
				continue
			}
			rec, ok := FromTablesJournal(keyspace, shard, raw)
			if !ok {
				continue
			}
			rec.Preexisting = first
			added, err := m.reg.Record(ctx, rec)
			if err != nil {
				return err
			}
			if added {
				m.log.Info("MoveTables journal recorded", "keyspace", keyspace, "participant", shard, "journal", rec.Key,
					"to", rec.TargetKeyspace, "tables", rec.Tables, "local_position", raw.LocalPosition, "preexisting", first)
			}
			found[rec.Key] = true
		}
	}
	if first {
		if _, err := m.st.PutIfAbsent(ctx, scannedNS(), keyspace, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
			return err
		}
	}
	if len(found) == 0 {
		return nil
	}
	all, err := m.reg.ListWithTargets(ctx, keyspace)
	if err != nil {
		return err
	}
	for _, j := range all {
		m.mu.Lock()
		done := m.handled[j.Key]
		m.mu.Unlock()
		if !found[j.Key] || done || !j.Moves() || j.Preexisting || !j.Complete() {
			continue
		}
		if err := m.onMove(ctx, j); err != nil {
			return err
		}
		m.mu.Lock()
		m.handled[j.Key] = true
		m.mu.Unlock()
	}
	return nil
}
