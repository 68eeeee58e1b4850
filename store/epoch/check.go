package epoch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// Check compares the marks with what this replica knows, handles a loss it
// finds, and retries the hooks of a loss not yet recovered from. An error
// means the store could not be checked (it did not answer) or a hook
// failed; Run calls it again at the next interval.
func (g *Guard) Check(ctx context.Context) error {
	if err := g.detect(ctx); err != nil {
		return err
	}
	return g.recover(ctx)
}

func (g *Guard) detect(ctx context.Context) error {
	g.mu.Lock()
	cur, replaced := g.cur, g.replaced
	g.mu.Unlock()
	rec, err := g.read(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return g.lost(ctx, Wiped, cur)
	case err != nil:
		return err
	case rec.ID == cur.ID:
		// The same epoch; another replica may have added when data was
		// lost (a replica that started on the emptied store learns it).
		g.mu.Lock()
		g.cur = rec
		g.mu.Unlock()
	case rec.Previous == cur.ID:
		// Another replica found the loss first.
		g.found(Loss{How: rec.How, Lost: cur, Current: rec})
		return g.resetClock(ctx)
	case replaced != "" && rec.Previous == replaced:
		// This replica and another both found the same loss and both
		// wrote a new record; theirs came last. Nothing new.
		g.mu.Lock()
		g.cur = rec
		g.mu.Unlock()
	default:
		// A record that does not follow this replica's: one started on the
		// emptied store took it for a new one (or several losses came in a
		// row). Say in it that data was lost.
		if rec.LostAt.IsZero() {
			rec.LostAt, rec.Previous, rec.How = time.Now().UTC(), cur.ID, Replaced
			if err := g.write(ctx, rec); err != nil {
				return err
			}
		}
		g.found(Loss{How: Replaced, Lost: cur, Current: rec})
		return g.resetClock(ctx)
	}
	return g.tick(ctx, cur)
}

// tick appends to the clock log: a sequence number at or below one this
// replica already got means the store went back in time.
func (g *Guard) tick(ctx context.Context, cur Record) error {
	n, err := g.st.Append(ctx, ClockLog, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	if err != nil {
		return err
	}
	g.mu.Lock()
	back := n <= g.clock
	if !back {
		g.clock = n
	}
	g.mu.Unlock()
	if back {
		return g.lost(ctx, RolledBack, cur)
	}
	// Keep only the last entry: the log is a counter, not a history.
	_ = g.st.TrimLog(ctx, ClockLog, n-1)
	g.intact()
	return nil
}

// resetClock takes the clock's number as it is after a loss.
func (g *Guard) resetClock(ctx context.Context) error {
	n, err := g.st.Append(ctx, ClockLog, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.clock = n
	g.mu.Unlock()
	return nil
}

// lost records a loss of cur's data found by this replica: a new epoch
// record saying when, unless another replica wrote one first.
func (g *Guard) lost(ctx context.Context, how string, cur Record) error {
	now := time.Now().UTC()
	next := Record{ID: newID(), CreatedAt: now, LostAt: now, Previous: cur.ID, How: how}
	if how == RolledBack {
		// The record is still there (older data is): replace it. Two
		// replicas doing so at once are reconciled by detect.
		if err := g.write(ctx, next); err != nil {
			return err
		}
	} else {
		won, err := g.create(ctx, next)
		if err != nil {
			return err
		}
		if !won {
			rec, err := g.read(ctx)
			if err != nil {
				return err
			}
			if rec.Previous != cur.ID && rec.LostAt.IsZero() {
				rec.LostAt, rec.Previous, rec.How = now, cur.ID, how
				if err := g.write(ctx, rec); err != nil {
					return err
				}
			}
			next = rec
		}
	}
	g.found(Loss{How: how, Lost: cur, Current: next})
	return g.resetClock(ctx)
}

// found starts handling a loss: loudly, and with every hook to run.
func (g *Guard) found(l Loss) {
	g.mu.Lock()
	g.replaced, g.cur = l.Lost.ID, l.Current
	g.pending = &pendingLoss{loss: l, left: append([]Hook(nil), g.hooks...)}
	g.mu.Unlock()
	g.observe(true, true)
	what := "its data is gone"
	if l.How == RolledBack {
		what = "it went back to older data (a snapshot, or a replica that had not received the last writes); what was written after that is gone"
	}
	g.log.Error("THE STORE LOST DATA: "+what+
		". Lost with it: stream definitions not in --streams-file, subscriber cursors (a named subscriber without one gets a resync event with reason store_lost and a fresh snapshot), reshard journals and bridges, webhooks and their dead letters, leases."+
		" Restoring what this replica can; /readyz fails until done. Configure Redis persistence (appendonly yes) to avoid this.",
		"how", l.How, "lost_epoch", l.Lost.ID, "lost_epoch_created", l.Lost.CreatedAt, "epoch", l.Current.ID, "lost_at", l.Current.LostAt)
}

// recover runs the hooks a loss still needs, in order, stopping at the
// first failure (it runs again at the next check).
func (g *Guard) recover(ctx context.Context) error {
	g.mu.Lock()
	p := g.pending
	g.mu.Unlock()
	if p == nil {
		return nil
	}
	for len(p.left) > 0 {
		h := p.left[0]
		if err := h.Fn(ctx, p.loss); err != nil {
			g.mu.Lock()
			p.err = fmt.Errorf("%s: %w", h.Name, err)
			g.mu.Unlock()
			g.log.Warn("restoring after the store lost data: not done yet", "step", h.Name, "err", err)
			return err
		}
		g.mu.Lock()
		p.left, p.err = p.left[1:], nil
		g.mu.Unlock()
	}
	g.mu.Lock()
	if g.pending == p {
		g.pending = nil
	}
	g.mu.Unlock()
	g.observe(false, false)
	g.log.Warn("restored what this replica could after the store lost data", "how", p.loss.How, "epoch", p.loss.Current.ID)
	return nil
}
