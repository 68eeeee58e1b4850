// Package epoch finds out when the store has lost data (DESIGN §12).
//
// A Redis restarted without persistence comes back empty; one restored
// from an older snapshot, or a replica promoted before it had the last
// writes, comes back with older data. Either way the gateway would carry
// on as if nothing happened: stream definitions gone, subscriber cursors
// gone or older, journals gone. The store cannot say so itself, so the
// gateway leaves two marks in it and watches them:
//
//   - the epoch record, written once when the store is first used. If it
//     vanishes, the store's data is gone (wiped); if another one replaces
//     it, another replica found the loss first, or started on the emptied
//     store and took it for a new one.
//   - a clock: a log every replica appends to every interval. Its sequence
//     numbers only grow, so an append that returns a number at or below
//     one this replica already got means the store went back in time
//     (rolled back) — without anything missing that could be noticed.
//
// On a loss the Guard logs an error, counts it, replaces the epoch record
// with one that says when data was lost (so that every replica, and every
// replica started later, knows), and runs the recovery hooks the gateway
// registered until they have all succeeded; Err reports the loss until
// then (/readyz). What a hook restores is the hook's business.
package epoch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// Where the marks live.
const (
	Namespace = "meta"
	Key       = "epoch"
	ClockLog  = "meta/clock"
)

// Record is the epoch record.
type Record struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// LostAt is when a replica found that the store had lost the data of
	// the epoch before this one (Previous); zero for a store that never
	// lost data since it was first used.
	LostAt   time.Time `json:"lost_at,omitzero"`
	Previous string    `json:"previous,omitempty"`
	// How is how the loss showed: wiped (the record vanished), replaced
	// (another record appeared) or rolled_back (the clock went back).
	How string `json:"how,omitempty"`
}

// The ways a loss shows.
const (
	Wiped      = "wiped"
	Replaced   = "replaced"
	RolledBack = "rolled_back"
)

// Loss is one loss this replica found, handed to the hooks.
type Loss struct {
	How string
	// Lost is the epoch whose data is gone (or partly gone).
	Lost Record
	// Current is the epoch record now in the store.
	Current Record
}

// Hook restores what it can after a loss. It must be idempotent: it runs
// again, on every replica, until it returns nil.
type Hook struct {
	Name string
	Fn   func(ctx context.Context, l Loss) error
}

// ErrLost is behind Err while a loss is not recovered from.
var ErrLost = errors.New("the store lost data")

// Guard watches one store.
type Guard struct {
	st       store.Store
	log      *slog.Logger
	interval time.Duration
	observe  func(lost, recovering bool)
	intact   func()

	mu       sync.Mutex
	cur      Record
	replaced string // the epoch this replica replaced, if any (see adopt)
	clock    uint64 // the highest clock number this replica got
	hooks    []Hook
	pending  *pendingLoss
}

type pendingLoss struct {
	loss Loss
	left []Hook // hooks that have not succeeded yet
	err  error  // the last hook failure
}

// Option configures a Guard.
type Option func(*Guard)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(g *Guard) { g.log = l } }

// WithInterval sets how often the marks are checked (default 1s): the
// longest a loss goes unnoticed while the store answers.
func WithInterval(d time.Duration) Option { return func(g *Guard) { g.interval = d } }

// WithObserver is told about every loss (lost) and whether recovery is
// still incomplete (recovering): metrics.
func WithObserver(f func(lost, recovering bool)) Option { return func(g *Guard) { g.observe = f } }

// WithIntact is called after every check that found the store as this
// replica left it: the moment to note what it holds, to compare with
// after a loss.
func WithIntact(f func()) Option { return func(g *Guard) { g.intact = f } }

// Open reads the store's epoch record, creating it when the store has
// none (its first use — or a loss while no replica was running, which
// nothing can tell apart: the README says so).
func Open(ctx context.Context, st store.Store, opts ...Option) (*Guard, error) {
	g := &Guard{st: st, log: slog.Default(), interval: time.Second, observe: func(bool, bool) {}, intact: func() {}}
	for _, o := range opts {
		o(g)
	}
	rec, err := g.read(ctx)
	if errors.Is(err, store.ErrNotFound) {
		rec = Record{ID: newID(), CreatedAt: time.Now().UTC()}
		var won bool
		if won, err = g.create(ctx, rec); err == nil && !won {
			rec, err = g.read(ctx) // another replica started at the same time
		}
	}
	if err != nil {
		return nil, fmt.Errorf("epoch: %w", err)
	}
	g.cur = rec
	if n, err := st.Append(ctx, ClockLog); err == nil {
		g.clock = n
	}
	return g, nil
}

// OnLoss registers a recovery hook; hooks run in registration order.
func (g *Guard) OnLoss(name string, fn func(ctx context.Context, l Loss) error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hooks = append(g.hooks, Hook{Name: name, Fn: fn})
}

// Current returns the epoch record this replica works in.
func (g *Guard) Current() Record {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur
}

// LostAt is when the store last lost data, zero if never (as far as the
// epoch record tells).
func (g *Guard) LostAt() time.Time { return g.Current().LostAt }

// Err is non-nil (wrapping ErrLost) from a loss until every hook has
// succeeded.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.pending
	if p == nil {
		return nil
	}
	what := fmt.Sprintf("%s at %s; restoring", p.loss.How, p.loss.Current.LostAt.Format(time.RFC3339))
	if p.err != nil {
		return fmt.Errorf("%w (%s): %v", ErrLost, what, p.err)
	}
	return fmt.Errorf("%w (%s)", ErrLost, what)
}

// Run checks every interval until ctx ends. It also says, once each way,
// when the store stops and starts answering: requests that need it are
// refused meanwhile and log only at debug level.
func (g *Guard) Run(ctx context.Context) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	var downSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := g.Check(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, store.ErrUnavailable):
			if downSince.IsZero() {
				downSince = time.Now()
				g.log.Warn("the store does not answer: acks, new named subscribers and admin requests get 503 store_unavailable until it does; connected readers keep reading", "err", err)
			}
		case err != nil:
			g.log.Debug("store epoch check failed", "err", err)
		}
		if err == nil && !downSince.IsZero() {
			g.log.Warn("the store answers again", "after", time.Since(downSince).Round(time.Millisecond))
			downSince = time.Time{}
		}
	}
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (g *Guard) read(ctx context.Context) (Record, error) {
	b, err := g.st.Get(ctx, Namespace, Key)
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		return Record{}, fmt.Errorf("corrupt epoch record %q: %v", b, err)
	}
	return r, nil
}

func (g *Guard) create(ctx context.Context, r Record) (bool, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return false, err
	}
	return g.st.PutIfAbsent(ctx, Namespace, Key, b)
}

func (g *Guard) write(ctx context.Context, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return g.st.Put(ctx, Namespace, Key, b)
}
