// Package hub connects readers of a stream to the source.
//
// Every client gets a Subscription: the stream's transactions from a
// position, each with the cursor token right after it. Its live part
// follows the stream's tail, one upstream VStream per stream shared by every
// reader the tail's ring covers, or a catch-up VStream of its own until it
// reaches the ring (DESIGN §5). Pull clients come and go between requests,
// so a Subscription can be parked under the cursor it stopped at and picked
// up by the next request that presents that cursor.
//
// A subscription replays the spools of its subscriber's bridges (DESIGN §4
// rule 3); package bridge, above this one, makes them, through Cursors
// (AddBridge) and the spool entry format (EncodeSpoolEntry).
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
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// Hub hands out subscriptions.
type Hub struct {
	src     upstream.Opener
	up      *upstream.Upstream // every VStream a reader or a tail reads
	codec   *cursor.Codec
	st      store.Store
	cursors *Cursors
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	parkTTL time.Duration

	rebuilder Rebuilder
	observe   RebuildObserver
	moves     upstream.MoveWatch // nil: MoveTables cutovers are not followed

	spoolGrace time.Duration // a freed bridge's spool is kept this long

	tailOpts TailOptions

	lostAt     func() time.Time // see WithStoreLoss
	lossWindow time.Duration

	mu      sync.Mutex
	parked  map[string][]*parked // by parkKey (stream and cursor), oldest first
	nParked int
	tails   map[string]*tail // by stream name
	closed  bool
	wg      sync.WaitGroup
}

type parked struct {
	sub   *Subscription
	timer *time.Timer
	// private: the subscription reads a VStream of its own (not the
	// tail), which a binlog dump thread on the primary serves while it
	// is parked.
	private bool
}

// DefaultSpoolGrace is how long a bridge's spool is kept after its
// subscriber acked past it, for its other readers still replaying it
// (DESIGN §4 rule 3): far longer than a parked pull subscription lives or
// a replay of a bounded spool takes. A reader slower than that fails with
// ErrSpoolGone and resumes from the subscriber's cursor.
const DefaultSpoolGrace = time.Hour

// New returns a hub, or ErrOption for an option it cannot take.
func New(src upstream.Opener, codec *cursor.Codec, st store.Store, opts ...Option) (*Hub, error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{
		src: src, codec: codec, st: st, cursors: NewCursors(st), log: slog.Default(),
		ctx: ctx, cancel: cancel, parkTTL: defaultParkTTL,
		spoolGrace: DefaultSpoolGrace, parked: map[string][]*parked{}, tails: map[string]*tail{}, tailOpts: DefaultTailOptions,
		lossWindow: DefaultLossWindow,
	}
	for _, o := range opts {
		if err := o(h); err != nil {
			cancel()
			return nil, err
		}
	}
	h.up = upstream.New(src, h.moves, h.log)
	return h, nil
}

// Close ends every parked subscription. Live subscriptions end with their
// owners.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	for k, ps := range h.parked {
		delete(h.parked, k)
		for _, p := range ps {
			p.timer.Stop()
			p.sub.close()
		}
	}
	h.nParked = 0
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// StartPosition is where a reader without a cursor begins.
func StartPosition(def *streams.Definition) *binlogdatapb.VGtid {
	if def.Start == streams.StartSnapshot {
		return source.SnapshotPosition(def.Keyspace)
	}
	return source.NowPosition(def.Keyspace)
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
//
// Readers in step with the stream's tail stand at the same cursor after
// each page, so many are parked under one key: a hundred long-pollers of a
// dashboard would otherwise keep one parked subscription between them and
// open the other ninety-nine again (token decode, plan, a search of the
// ring) on every poll. Up to maxParkedPerCursor are kept per cursor; the
// oldest goes first. A subscription with a VStream of its own (a catch-up)
// costs the primary a dump thread while it waits, so of those one per
// cursor is kept, the newest, as a client retrying a request needs.
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
	key := parkKey(s.def.Name, tok)
	p := &parked{sub: s, private: !followsTail(s.r)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, old := range slices.Clone(h.parked[key]) {
		samePrivate := p.private && old.private && old.sub.subscriber == s.subscriber
		if samePrivate || len(h.parked[key]) >= maxParkedPerCursor {
			old.timer.Stop()
			h.dropParked(key, old)
			old.sub.close()
		}
	}
	p.timer = time.AfterFunc(h.parkTTL, func() {
		h.mu.Lock()
		ok := h.dropParked(key, p)
		h.mu.Unlock()
		if ok {
			s.close()
		}
	})
	h.parked[key] = append(h.parked[key], p)
	h.nParked++
}

// maxParkedPerCursor bounds the subscriptions parked under one cursor.
const maxParkedPerCursor = 4096

// dropParked removes p from key's parked subscriptions, reporting whether
// it was there. Called with mu held.
func (h *Hub) dropParked(key string, p *parked) bool {
	ps := h.parked[key]
	i := slices.Index(ps, p)
	if i < 0 {
		return false
	}
	ps = slices.Delete(ps, i, i+1)
	if len(ps) == 0 {
		delete(h.parked, key)
	} else {
		h.parked[key] = ps
	}
	h.nParked--
	return true
}

// parkKey is where subscriptions are parked: by stream and cursor.
func parkKey(stream, token string) string { return stream + "\x00" + token }

// unpark takes a subscription parked under token for subscriber: the
// newest it parked itself. A named subscriber's request never takes one
// another reader parked at the same cursor: that one was planned for the
// other reader (a resync's snapshot, another subscriber's spools, none of
// its own). A request with a cursor alone may take any, its own kind
// first: a named subscriber paging with `cursor=` alone reads on in the
// spools its first page planned, and a subscription at a cursor reads
// from there whoever holds it (scopes apply at the transport).
func (h *Hub) unpark(stream, subscriber, token string) *Subscription {
	key := parkKey(stream, token)
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.takeParked(key, func(p *parked) bool { return p.sub.subscriber == subscriber }); s != nil || subscriber != "" {
		return s
	}
	return h.takeParked(key, func(*parked) bool { return true })
}

// takeParked takes the newest subscription parked under key that ok
// accepts. Called with mu held.
func (h *Hub) takeParked(key string, ok func(*parked) bool) *Subscription {
	ps := h.parked[key]
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if !ok(p) {
			continue
		}
		if p.timer.Stop() {
			h.dropParked(key, p)
			return p.sub
		}
		// Its timer fired: its function, waiting for mu, drops and
		// closes it.
	}
	return nil
}

// Parked reports how many subscriptions are parked (for metrics and tests).
func (h *Hub) Parked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nParked
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
