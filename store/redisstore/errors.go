package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// transientReplies are the prefixes of server answers that say "not now"
// rather than "never": a server loading its data set, a replica that is
// read-only, a primary without replicas to confirm a write, a cluster
// without a serving primary for the slot or moving it. Callers see them
// as store.ErrUnavailable and retry later.
var transientReplies = []string{
	"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK",
	"NOREPLICAS", "BUSY", "NOQUORUM", "UNBLOCKED",
}

// unavailable reports whether err means the store could not be reached
// or could not serve the call now. Everything that is not a server reply
// (refused or reset connections, timeouts, an exhausted pool) is; of the
// server's replies only transientReplies are. A caller that canceled its
// own context is not told the store is unavailable.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, redis.Nil) {
		return false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	msg := re.Error()
	for _, p := range transientReplies {
		if strings.HasPrefix(msg, p+" ") || msg == p {
			return true
		}
	}
	return false
}

// wrap adds context to an error. A call that fails because Close ran
// underneath it reports store.ErrClosed, whatever the client library said;
// one that could not reach the server reports store.ErrUnavailable (with
// the cause).
func (s *Store) wrap(err error, format string, args ...any) error {
	switch {
	case errors.Is(err, redis.ErrClosed) || (s.closed.Load() && !isSentinel(err)):
		return fmt.Errorf("redisstore: "+format+": %w (%v)", append(args, store.ErrClosed, err)...)
	case unavailable(err):
		return fmt.Errorf("redisstore: "+format+": %w: %w", append(args, store.ErrUnavailable, err)...)
	}
	return fmt.Errorf("redisstore: "+format+": %w", append(args, err)...)
}

// isSentinel reports whether err is an answer from the store rather than a
// failure to get one.
func isSentinel(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseHeld) ||
		errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrFenced) ||
		errors.Is(err, store.ErrClosed)
}
