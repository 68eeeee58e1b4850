// Package hub connects readers of a stream to the source.
//
// Every client gets a Subscription: the stream's transactions from a
// position, each with the cursor token right after it. Its live part
// follows the stream's tail, one upstream VStream per stream shared by every
// reader the tail's ring covers, or a catch-up VStream of its own until it
// reaches the ring (DESIGN §5). Pull clients come and go between requests,
// so a Subscription can be parked under the cursor it stopped at and picked
// up by the next request that presents that cursor.
package hub

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Opener opens readers; *source.Client is the production one.
type Opener interface {
	Open(ctx context.Context, spec source.Spec, from *binlogdatapb.VGtid, opts ...source.ReadOption) *source.Reader
}

// Hub hands out subscriptions.
type Hub struct {
	src     Opener
	codec   *cursor.Codec
	st      store.Store
	cursors *Cursors
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	parkTTL time.Duration

	rebuilder Rebuilder
	observe   RebuildObserver
	mover     Mover // nil: MoveTables cutovers are not followed

	holder       string        // this replica, in leases
	moveLeaseTTL time.Duration // MoveTables bridging leases

	bridgeTimeout  time.Duration
	bridgeStall    time.Duration
	spoolMaxEvents int
	spoolMaxBytes  int
	spoolGrace     time.Duration // a freed bridge's spool is kept this long

	tailOpts TailOptions

	lostAt     func() time.Time // see WithStoreLoss
	lossWindow time.Duration

	mu     sync.Mutex
	parked map[string]*parked // by stream + "\x00" + token
	tails  map[string]*tail   // by stream name
	closed bool
	wg     sync.WaitGroup
}

type parked struct {
	sub   *Subscription
	timer *time.Timer
}

// Option configures a Hub.
type Option func(*Hub)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(h *Hub) { h.log = l } }

// WithParkTTL sets how long an idle pull subscription stays open.
func WithParkTTL(d time.Duration) Option { return func(h *Hub) { h.parkTTL = d } }

// WithSpoolLimit bounds each bridge spool. A bridge that would exceed it
// fails (reported in GET /v1/reshards and the log) instead of filling the
// store.
func WithSpoolLimit(events, bytes int) Option {
	return func(h *Hub) { h.spoolMaxEvents, h.spoolMaxBytes = events, bytes }
}

// DefaultSpoolGrace is how long a bridge's spool is kept after its
// subscriber acked past it, for its other readers still replaying it
// (DESIGN §4 rule 3): far longer than a parked pull subscription lives or
// a replay of a bounded spool takes. A reader slower than that fails with
// ErrSpoolGone and resumes from the subscriber's cursor.
const DefaultSpoolGrace = time.Hour

// WithSpoolGrace sets how long a freed bridge's spool is kept.
func WithSpoolGrace(d time.Duration) Option { return func(h *Hub) { h.spoolGrace = d } }

// New returns a hub.
func New(src Opener, codec *cursor.Codec, st store.Store, opts ...Option) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{
		src: src, codec: codec, st: st, cursors: NewCursors(st), log: slog.Default(),
		ctx: ctx, cancel: cancel, parkTTL: 30 * time.Second,
		bridgeTimeout: 5 * time.Minute, bridgeStall: 5 * time.Second, spoolMaxEvents: 1_000_000, spoolMaxBytes: 512 << 20,
		spoolGrace: DefaultSpoolGrace, parked: map[string]*parked{}, tails: map[string]*tail{}, tailOpts: DefaultTailOptions,
		lossWindow: DefaultLossWindow, holder: randomHolder(), moveLeaseTTL: 10 * time.Second,
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Close ends every parked subscription. Live subscriptions end with their
// owners.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for k, p := range h.parked {
		p.timer.Stop()
		delete(h.parked, k)
		p.sub.close()
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// StartPosition is where a reader without a cursor begins.
func StartPosition(def *streams.Definition) *binlogdatapb.VGtid {
	if def.Start == streams.StartSnapshot {
		return source.StartSnapshot(def.Keyspace)
	}
	return source.StartNow(def.Keyspace)
}

func (h *Hub) newSubscription(def *streams.Definition, from *binlogdatapb.VGtid, token string, src txnSource) *Subscription {
	start := position.Of(from)
	return &Subscription{
		hub:   h,
		def:   def,
		r:     src,
		pos:   from,
		token: token,
		// A reader that starts at "now" is at the live end by definition.
		caughtUp: !start.Concrete() && !start.Copying(),
		snapshot: start.Copying(),
	}
}

// Park keeps s open for parkTTL under its current cursor, for the next pull
// request. s must not be used by the caller afterwards.
func (h *Hub) Park(s *Subscription) {
	tok := s.token
	if s.inTxn > 0 {
		// Inside a chunked transaction: parked under the cursor of
		// where it is, the next page's, made by ResumeCursor.
		tok = s.resumeTok
	}
	if s.failed || tok == "" {
		s.close()
		return
	}
	key := s.def.Name + "\x00" + tok
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.parked[key]; ok {
		// Two clients at the same cursor: keep one.
		old.timer.Stop()
		old.sub.close()
	}
	p := &parked{sub: s}
	p.timer = time.AfterFunc(h.parkTTL, func() {
		h.mu.Lock()
		cur, ok := h.parked[key]
		if ok && cur == p {
			delete(h.parked, key)
		}
		h.mu.Unlock()
		if ok && cur == p {
			s.close()
		}
	})
	h.parked[key] = p
}

func (h *Hub) unpark(stream, token string) *Subscription {
	key := stream + "\x00" + token
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.parked[key]
	if !ok || !p.timer.Stop() {
		return nil
	}
	delete(h.parked, key)
	return p.sub
}

// Parked reports how many subscriptions are parked (for metrics and tests).
func (h *Hub) Parked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.parked)
}

// sameDefinition compares by origin keyspace: a stream whose tables moved
// (DESIGN §4.1) is the same stream, and its tail follows the move itself.
// The filter is compared too: a stream defined again from the streams
// file keeps its creation time, and its tail must not go on reading the
// old filter.
func sameDefinition(a, b *streams.Definition) bool {
	return a == b || (a.Name == b.Name && a.Origin() == b.Origin() && a.CreatedAt.Equal(b.CreatedAt) &&
		slices.Equal(a.Tables, b.Tables) && slices.Equal(a.Rules, b.Rules))
}
