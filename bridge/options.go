package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// The defaults.
const (
	// DefaultMoveLease is the time-to-live of a MoveTables cutover's
	// bridging lease: the longest its bridges stay undone after the
	// replica bridging them died.
	DefaultMoveLease = 10 * time.Second
	// DefaultTimeout bounds one subscriber's capture.
	DefaultTimeout = 5 * time.Minute
	// DefaultStall is how long a bridge's VStream may deliver nothing but
	// heartbeats before it is reopened (doubled at every reopen, up to the
	// timeout; DESIGN §4 rule 5).
	DefaultStall = 5 * time.Second
	// DefaultSpoolEvents and DefaultSpoolBytes bound each spool: a bridge
	// that would pass either fails (ErrSpoolFull).
	DefaultSpoolEvents = 1_000_000
	DefaultSpoolBytes  = 512 << 20
)

// Option configures a Bridger. An option checks its value: New fails on
// the first one that does not hold.
type Option func(*options) error

type options struct {
	log       *slog.Logger
	holder    string        // this replica, in leases
	moveLease time.Duration // MoveTables bridging leases
	timeout   time.Duration
	stall     time.Duration
	maxEvents int
	maxBytes  int
	topology  Topology // nil: reshard bridges do not wait for the switch
}

func defaults() options {
	return options{log: slog.Default(), holder: randomHolder(), moveLease: DefaultMoveLease, timeout: DefaultTimeout,
		stall: DefaultStall, maxEvents: DefaultSpoolEvents, maxBytes: DefaultSpoolBytes}
}

// Topology is vtgate's serving graph, as source.Client reads it.
type Topology interface {
	Topology(ctx context.Context, keyspaces ...string) (source.Topology, error)
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrOption)
		}
		o.log = l
		return nil
	}
}

// WithHolder names this replica in the leases the bridger takes (the
// server's replica id). Default: a random name.
func WithHolder(id string) Option {
	return func(o *options) error {
		if id == "" {
			return fmt.Errorf("%w: empty lease holder", ErrOption)
		}
		o.holder = id
		return nil
	}
}

// WithMoveLease sets the time-to-live of a MoveTables cutover's bridging
// lease (default DefaultMoveLease).
func WithMoveLease(ttl time.Duration) Option {
	return func(o *options) error {
		if ttl < 3*time.Millisecond {
			return fmt.Errorf("%w: move lease %v is shorter than 3ms", ErrOption, ttl)
		}
		o.moveLease = ttl
		return nil
	}
}

// WithTimeout bounds one subscriber's capture (default DefaultTimeout): a
// bridge still capturing then fails.
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: timeout %v is not positive", ErrOption, d)
		}
		o.timeout = d
		return nil
	}
}

// WithStall sets how long a bridge's VStream may make no progress before
// it is reopened (default DefaultStall).
func WithStall(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: stall window %v is not positive", ErrOption, d)
		}
		o.stall = d
		return nil
	}
}

// WithSpoolLimit bounds each bridge spool (default DefaultSpoolEvents,
// DefaultSpoolBytes). A bridge that would exceed it fails (reported in GET
// /v1/reshards and the log) instead of filling the store.
func WithSpoolLimit(events, bytes int) Option {
	return func(o *options) error {
		if events < 1 || bytes < 1 {
			return fmt.Errorf("%w: spool limit of %d events, %d bytes is not positive", ErrOption, events, bytes)
		}
		o.maxEvents, o.maxBytes = events, bytes
		return nil
	}
}

// WithTopology makes a reshard's bridges wait (briefly) for vtgate's
// serving graph to show the switch before they capture (awaitSwitch).
// Without it they capture at once.
func WithTopology(t Topology) Option {
	return func(o *options) error {
		if t == nil {
			return fmt.Errorf("%w: nil topology", ErrOption)
		}
		o.topology = t
		return nil
	}
}

func randomHolder() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "bridge/" + hex.EncodeToString(b)
}
