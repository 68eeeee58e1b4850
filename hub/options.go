package hub

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// Defaults of a Hub without options:
//   - logger: slog.Default()
//   - park TTL: 30 s (an idle pull subscription waits this long for its
//     next page)
//   - tails: DefaultTailOptions (the shared fan-out on, DESIGN §5)
//   - spool grace: DefaultSpoolGrace (1 h)
//   - store loss: none known, window DefaultLossWindow (7 days)
//   - no cursor rebuilds across reshards, no MoveTables following.
const defaultParkTTL = 30 * time.Second

// ErrOption is what New reports for an option it cannot take.
var ErrOption = errors.New("hub: invalid option")

// Option configures a Hub; it reports a value it cannot take.
type Option func(*Hub) error

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOption, fmt.Sprintf(format, args...))
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option {
	return func(h *Hub) error {
		if l == nil {
			return invalid("nil logger")
		}
		h.log = l
		return nil
	}
}

// WithParkTTL sets how long an idle pull subscription stays open.
func WithParkTTL(d time.Duration) Option {
	return func(h *Hub) error {
		if d <= 0 {
			return invalid("park TTL %v: must be positive", d)
		}
		h.parkTTL = d
		return nil
	}
}

// WithTails turns the shared fan-out on (it is on by default) or, with
// RingEntries 0, off: every reader then has a VStream of its own.
func WithTails(o TailOptions) Option {
	return func(h *Hub) error {
		if o.RingBytes < 0 || o.RingEntries < 0 || o.Idle < 0 || o.StartWait < 0 {
			return invalid("tail options %+v: no bound may be negative", o)
		}
		h.tailOpts = o
		return nil
	}
}

// WithSpoolGrace sets how long a freed bridge's spool is kept
// (DefaultSpoolGrace; 0 deletes it at the subscriber's next plan).
func WithSpoolGrace(d time.Duration) Option {
	return func(h *Hub) error {
		if d < 0 {
			return invalid("spool grace %v: must not be negative", d)
		}
		h.spoolGrace = d
		return nil
	}
}

// WithRebuilder enables cursor rebuilds across reshards; observe, which
// may be nil, is told every outcome.
func WithRebuilder(r Rebuilder, observe RebuildObserver) Option {
	return func(h *Hub) error {
		if r == nil {
			return invalid("nil rebuilder")
		}
		h.rebuilder, h.observe = r, observe
		return nil
	}
}

// WithMoveWatch makes readers follow MoveTables cutovers.
func WithMoveWatch(m upstream.MoveWatch) Option {
	return func(h *Hub) error {
		if m == nil {
			return invalid("nil MoveTables watch")
		}
		h.moves = m
		return nil
	}
}

// WithStoreLoss tells the hub when the store last lost data (lostAt
// returns zero if never). For window after a loss, a named subscriber that
// has no stored cursor is not started silently at the stream's start — it
// may be one whose cursor was lost: it gets a resync event with reason
// store_lost and a fresh snapshot. A subscriber that is really new within
// the window gets the same (a snapshot it did not ask for, said out loud,
// rather than a silent gap for one that lost its cursor). Resyncs of
// cursors whose shards are gone also say store_lost in the window: the
// journals that would have continued them may have been lost.
func WithStoreLoss(lostAt func() time.Time, window time.Duration) Option {
	return func(h *Hub) error {
		if lostAt == nil || window < 0 {
			return invalid("store loss: a time function and a window of 0 or more are needed")
		}
		h.lostAt, h.lossWindow = lostAt, window
		return nil
	}
}
