package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// All bridges every named subscriber of the streams on j's keyspace that
// is behind j's cutover. Subscribers are bridged concurrently (a few at a
// time): the old shards may be deleted seconds after the switch. With
// fence (the journal watcher's lease) spools and subscriber states are
// written only while that lease is held.
func (b *Bridger) All(ctx context.Context, defs []*streams.Definition, j *reshard.Journal, fence *store.Lease) {
	if !j.Moves() {
		b.awaitSwitch(ctx, j)
	}
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, def := range defs {
		if !Crosses(def, j) {
			continue
		}
		subs, err := b.cursors.List(ctx, def.Name)
		if err != nil {
			b.log.Warn("bridging: listing subscribers failed", "stream", def.Name, "err", err)
			continue
		}
		for _, s := range subs {
			wg.Add(1)
			sem <- struct{}{}
			go func(def *streams.Definition, sub string) {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := b.subscriber(ctx, def, sub, j, fence); err != nil {
					b.log.Error("bridging a subscriber across a cutover failed: it will get its stream's on_gap policy if the old shards (or moved tables) are deleted before it returns",
						"stream", def.Name, "subscriber", sub, "journal", j.Key, "err", err)
				}
			}(def, s.Name)
		}
	}
	wg.Wait()
}

// Crosses reports whether def's subscribers may be behind j: a reshard of
// its keyspace, or a MoveTables cutover it followed (DESIGN §4.1).
func Crosses(def *streams.Definition, j *reshard.Journal) bool {
	if !j.Moves() {
		return def.Keyspace == j.Keyspace
	}
	for _, m := range def.Moves {
		if m.Journal == j.Key {
			return true
		}
	}
	// Not moved yet: it will be once the journal is handled
	// (server/moves.go), and its subscribers are already behind it.
	follows, _ := def.Follows(j.Keyspace, j.Tables)
	return follows && !def.Moved().After(j.SeenAt)
}

// awaitSwitch waits (briefly) until vtgate's serving graph no longer lists
// j's participants. The JOURNAL is written in the middle of SwitchTraffic,
// while the old primary is not serving and vtgate does not yet consider
// the keyspace resharded; a VStream opened then searches in vain for a
// serving primary. Once the switch is visible vtgate accepts the
// non-serving old primary, which is what a bridge must read.
func (b *Bridger) awaitSwitch(ctx context.Context, j *reshard.Journal) {
	if b.opts.topology == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		topo, err := b.opts.topology.Topology(ctx, j.Keyspace)
		if err == nil {
			switched := true
			for _, p := range j.Participants {
				if topo.State(j.Keyspace, p) == source.ShardServing {
					switched = false
				}
			}
			if switched {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
