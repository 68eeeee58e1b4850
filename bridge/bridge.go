// Package bridge carries named subscribers across cutovers they were away
// for (DESIGN §4 rule 3, §4.1 rule 5).
//
// A named subscriber that went away before a reshard cutover holds a
// position on the old shards behind the journal's local_position. The
// events between its position and the cutover exist only on the old
// shards, which `Reshard complete` deletes, often seconds after
// SwitchTraffic. So as soon as a journal is recorded, the gateway streams
// each such subscriber's remaining old-shard events (stop_on_reshard) into
// a spool in the store and records "spool, then the journal's target
// positions" in the subscriber's state. On reconnect the hub replays the
// spool and continues on the new shards: nothing lost, nothing repeated.
// A MoveTables cutover is bridged the same way, from the tables' source
// keyspace to their target.
//
// This package writes bridges; package hub reads them. It records a
// bridge through the hub's Cursors (AddBridge, by compare-and-swap beside
// acks) and writes spool entries in the hub's format (EncodeSpoolEntry).
package bridge

import (
	"context"
	"log/slog"
	"sync"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// Bridger makes bridges.
type Bridger struct {
	cursors *hub.Cursors
	st      store.Store
	src     upstream.Opener
	log     *slog.Logger
	opts    options

	// MoveTables bridges run in the background until Close (Moved).
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns a bridger that records bridges in cursors (the hub's, whose
// writes it remembers against a store loss), writes spools and statuses to
// st, and captures with VStreams src opens (on the old shards, not through
// the hub's tails).
func New(cursors *hub.Cursors, st store.Store, src upstream.Opener, opts ...Option) (*Bridger, error) {
	o := defaults()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Bridger{cursors: cursors, st: st, src: src, log: o.log, opts: o, ctx: ctx, cancel: cancel}, nil
}

// Close stops the MoveTables bridges running in the background and waits
// for them: their leases are given back (the next holder bridges again).
// Call it before the store closes.
func (b *Bridger) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// NeedsOldShards reports whether subscriber s still needs j's old shards:
// its position (after any bridges) is behind the cutover and no bridge
// carries it across.
func (b *Bridger) NeedsOldShards(s *hub.SubscriberState, j *reshard.Journal) (bool, string) {
	pos, err := s.EffectivePosition()
	if err != nil {
		return true, "unreadable subscriber state"
	}
	if reshard.BehindCutover(pos, j) {
		return true, "cursor is behind the cutover on the old shards and not bridged"
	}
	return false, ""
}
