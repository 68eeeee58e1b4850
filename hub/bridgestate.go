package hub

import (
	"context"
	"slices"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// BridgeFit is what became of a captured bridge when it was recorded
// (AddBridge).
type BridgeFit int

const (
	// BridgeAdded: recorded in the subscriber's state.
	BridgeAdded BridgeFit = iota
	// BridgeUnneeded: the subscriber is gone, or moved meanwhile to where
	// the spool does not carry it (it crossed the cutover itself); the
	// spool is the caller's to drop.
	BridgeUnneeded
	// BridgeRecorded: a bridge of that journal is recorded already, and
	// the spool log (named by the journal) is that bridge's.
	BridgeRecorded
)

// EffectivePosition is where the subscriber's state ends: after its last
// bridge if it has any and its acked position is not past it, else its
// acked position. It is where a new bridge for it starts. A subscriber
// online across a cutover acks past the bridge made for it while it read
// on: a later bridge captured from the bridge's end would spool again
// what it acked (and replay it).
func (s *SubscriberState) EffectivePosition() (*binlogdatapb.VGtid, error) {
	if n := len(s.Bridges); n > 0 {
		p, err := position.Unmarshal(s.Bridges[n-1].After)
		if err != nil {
			return nil, err
		}
		if atOrPast(position.Of(s.VGtid), p) {
			return s.VGtid, nil
		}
		return p.VGtid(), nil
	}
	return s.VGtid, nil
}

// atOrPast reports whether at is at or after p on p's shards (the same
// shards: positions on other shards do not compare).
func atOrPast(at, p position.Position) bool {
	o := at.Compare(p)
	return at.Identical(p) || o == position.Equal || o == position.After
}

// AddBridge records b, captured from `from` across j, in the subscriber's
// state, by compare-and-swap (DESIGN §2): an ack or another write that
// lands while it is being recorded is kept, and the bridge is judged
// against the state as it is when written (fitBridge). With fence the
// write is refused (store.ErrFenced) unless that lease is still held.
// Only a fit of BridgeAdded recorded b.
func (c *Cursors) AddBridge(ctx context.Context, stream, sub string, from *binlogdatapb.VGtid, j *reshard.Journal, b Bridge, fence *store.Lease) (BridgeFit, error) {
	var fit BridgeFit
	_, err := c.update(ctx, stream, sub, fence, func(cur *SubscriberState) (*SubscriberState, error) {
		var err error
		if fit, err = fitBridge(cur, from, j); err != nil || fit != BridgeAdded {
			return nil, err
		}
		cur.Bridges = append(cur.Bridges, b)
		return cur, nil
	})
	return fit, err
}

// fitBridge tells whether a bridge whose capture started at from still
// carries the subscriber whose state is now cur. The subscriber may have
// acked while the bridge captured: a position still behind the cutover
// and past the spool's start is inside the spool, which serves it as it
// serves any cursor inside it (planBridges); one past the cutover crossed
// it and needs no bridge.
func fitBridge(cur *SubscriberState, from *binlogdatapb.VGtid, j *reshard.Journal) (BridgeFit, error) {
	if cur == nil {
		return BridgeUnneeded, nil
	}
	for _, b := range cur.Bridges {
		if b.Journal == j.Key {
			return BridgeRecorded, nil
		}
	}
	eff, err := cur.EffectivePosition()
	if err != nil {
		return 0, err
	}
	at, start := position.Of(eff), position.Of(from)
	if at.Identical(start) || (start.Compare(at) == position.Before && reshard.BehindCutover(eff, j)) {
		return BridgeAdded, nil
	}
	return BridgeUnneeded, nil
}

// dropBridges moves the bridges freed names (the first ones of the state
// read, acked past: acked at) from the subscriber's bridges to its freed
// ones, where they are still its first ones, and returns those it moved.
// An ack stored since is kept; a cursor stored since that is not at or
// past acked (an ack on the old shards, which the store takes as another
// position) may still need them, so they stay.
func (c *Cursors) dropBridges(ctx context.Context, stream, sub string, acked *binlogdatapb.VGtid, freed []Bridge, now time.Time) ([]Bridge, error) {
	var dropped []Bridge
	_, err := c.update(ctx, stream, sub, nil, func(cur *SubscriberState) (*SubscriberState, error) {
		dropped = nil
		if cur == nil {
			return nil, nil
		}
		at, then := position.Of(cur.VGtid), position.Of(acked)
		if o := at.Compare(then); !at.Identical(then) && o != position.Equal && o != position.After {
			return nil, nil
		}
		n := 0
		for n < len(freed) && n < len(cur.Bridges) && cur.Bridges[n].Journal == freed[n].Journal && cur.Bridges[n].Log == freed[n].Log {
			n++
		}
		if n == 0 {
			return nil, nil
		}
		dropped = slices.Clone(cur.Bridges[:n])
		for _, b := range dropped {
			b.FreedAt = now
			cur.Freed = append(cur.Freed, b)
		}
		cur.Bridges = cur.Bridges[n:]
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	return dropped, nil
}

// forgetFreed removes the freed bridges whose spools are deleted (logs)
// from the subscriber's state.
func (c *Cursors) forgetFreed(ctx context.Context, stream, sub string, logs []string) error {
	_, err := c.update(ctx, stream, sub, nil, func(cur *SubscriberState) (*SubscriberState, error) {
		if cur == nil {
			return nil, nil
		}
		kept := slices.DeleteFunc(slices.Clone(cur.Freed), func(b Bridge) bool { return slices.Contains(logs, b.Log) })
		if len(kept) == len(cur.Freed) {
			return nil, nil
		}
		cur.Freed = kept
		return cur, nil
	})
	return err
}
