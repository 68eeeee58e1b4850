package wsconn

import (
	"errors"
	"fmt"
	"time"
)

// Config is what the frame layer needs to know of a connection: how much a
// client may send, how often the server checks that it is still there, and
// how long a write may go on once the connection is done for.
type Config struct {
	// ReadLimit is the longest message a client may send, in bytes (the
	// library closes the connection with 1009 past it). A client sends
	// only small control messages, and without a bound one client could
	// make the server buffer as much as it likes.
	ReadLimit int64
	// KeepAlive is how often the server pings a client; one that has not
	// answered a ping by the next is gone (Ping reports ErrNoPong). A
	// client gone without a word (a dropped NAT mapping, a laptop closed)
	// sends no close frame, and only an unanswered ping shows it. Every
	// idle connection is pinged this often, so it is seconds, not less.
	KeepAlive time.Duration
	// GiveUp is how long writes may still take once the connection is
	// done for (GiveUpAfter): long enough for a final message on a
	// healthy connection, short enough that a writer blocked on a client
	// that stopped reading returns.
	GiveUp time.Duration
}

// DefaultConfig is the configuration the gateway runs with unless told
// otherwise: 4 KiB messages (an ack carries a cursor of up to 1 KiB), a
// ping every 15 s (inside the idle timeouts of common load balancers and
// NATs, often a minute), and 2 s to finish a final message.
func DefaultConfig() Config {
	return Config{
		ReadLimit: 4 << 10,
		KeepAlive: 15 * time.Second,
		GiveUp:    2 * time.Second,
	}
}

// ErrConfig wraps every error Validate reports.
var ErrConfig = errors.New("wsconn: invalid configuration")

// Validate reports the first setting the frame layer cannot work with.
// Each must be positive: a read limit of 0 refuses every message, a
// keep-alive of 0 would ping without pause, and a give-up of 0 fails the
// final message that tells the client where to resume.
func (c Config) Validate() error {
	switch {
	case c.ReadLimit <= 0:
		return fmt.Errorf("%w: ReadLimit must be positive, not %d", ErrConfig, c.ReadLimit)
	case c.KeepAlive <= 0:
		return fmt.Errorf("%w: KeepAlive must be positive, not %v", ErrConfig, c.KeepAlive)
	case c.GiveUp <= 0:
		return fmt.Errorf("%w: GiveUp must be positive, not %v", ErrConfig, c.GiveUp)
	}
	return nil
}
