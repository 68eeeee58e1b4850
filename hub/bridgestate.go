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

// bridgeFit is what became of a captured bridge when it was recorded.
type bridgeFit int

const (
	// bridgeAdded: recorded in the subscriber's state.
	bridgeAdded bridgeFit = iota
	// bridgeUnneeded: the subscriber is gone, or moved meanwhile to where
	// the spool does not carry it (it crossed the cutover itself); the
	// spool is the caller's to drop.
	bridgeUnneeded
	// bridgeRecorded: a bridge of that journal is recorded already, and
	// the spool log (named by the journal) is that bridge's.
	bridgeRecorded
)

// addBridge records b, captured from `from` across j, in the subscriber's
// state, by update: an ack or another write that lands while it is being
// recorded is kept, and the bridge is judged against the state as it is
// when written (fitBridge).
func (c *Cursors) addBridge(ctx context.Context, stream, sub string, from *binlogdatapb.VGtid, j *reshard.Journal, b Bridge, fence *store.Lease) (bridgeFit, error) {
	var fit bridgeFit
	_, err := c.update(ctx, stream, sub, fence, func(cur *SubscriberState) (*SubscriberState, error) {
		var err error
		if fit, err = fitBridge(cur, from, j); err != nil || fit != bridgeAdded {
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
func fitBridge(cur *SubscriberState, from *binlogdatapb.VGtid, j *reshard.Journal) (bridgeFit, error) {
	if cur == nil {
		return bridgeUnneeded, nil
	}
	for _, b := range cur.Bridges {
		if b.Journal == j.Key {
			return bridgeRecorded, nil
		}
	}
	eff, err := effectivePosition(cur)
	if err != nil {
		return 0, err
	}
	at, start := position.Of(eff), position.Of(from)
	if at.Identical(start) || (start.Compare(at) == position.Before && reshard.BehindCutover(eff, j)) {
		return bridgeAdded, nil
	}
	return bridgeUnneeded, nil
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
