package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// DefaultReplicaTimeout is how long a write waits for its replicas when
// WithMinReplicas is given without a timeout.
const DefaultReplicaTimeout = time.Second

// WithMinReplicas makes every write wait (Redis WAIT, up to timeout) until
// at least n replicas have it, and fail with store.ErrUnavailable when
// fewer confirm in time.
//
// Redis replicates asynchronously: a primary that fails over (Sentinel, or
// a Cluster replica promoted after its primary died) can lose writes it
// had already confirmed, and between a promotion and the old primary's
// demotion the old one still accepts writes that are then thrown away.
// With n ≥ 1 such a write is not confirmed to the caller (its replica is
// no longer following the old primary), so an ack the gateway reported
// done survives a failover to that replica. The price: one round trip to a
// replica per write, and writes fail while fewer than n replicas follow the
// primary. A write that failed this way may still have been applied.
func WithMinReplicas(n int, timeout time.Duration) Option {
	return func(c *config) {
		c.minReplicas = n
		if timeout > 0 {
			c.replicaTimeout = timeout
		}
	}
}

// checkReplicas refuses settings that cannot work: WAIT needs the write and
// the WAIT on one connection to the primary, which only a plain (or
// Sentinel) client or a Cluster client can name.
func (c config) checkReplicas(rdb redis.UniversalClient) error {
	if c.minReplicas < 0 {
		return fmt.Errorf("redisstore: min replicas %d is negative", c.minReplicas)
	}
	if c.minReplicas == 0 {
		return nil
	}
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		return nil
	default:
		return fmt.Errorf("redisstore: min replicas needs a plain, Sentinel or Cluster client, not %T", rdb)
	}
}

// writeOp issues one write on c, a client or (with WithMinReplicas) a
// pipeline to the primary, and returns its command: the caller reads the
// result from it once write returns.
type writeOp func(ctx context.Context, c redis.Cmdable) redis.Cmder

// write runs op. Without WithMinReplicas it is op on the client. With it,
// op and a WAIT go in one pipeline to the primary that holds the store's
// hash slot (one connection: WAIT counts the replicas that have that
// connection's writes), retried when a Cluster moves the slot meanwhile.
func (s *Store) write(ctx context.Context, op writeOp) error {
	if s.cfg.minReplicas == 0 {
		cmd := op(ctx, s.rdb)
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return nil
	}
	var err error
	for attempt := 0; ; attempt++ {
		err = s.writeAndWait(ctx, op)
		if err == nil || !movedSlot(err) || attempt == 3 {
			return err
		}
		if cc, ok := s.rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
}

func (s *Store) writeAndWait(ctx context.Context, op writeOp) error {
	node, err := s.primary(ctx)
	if err != nil {
		return err
	}
	var cmd redis.Cmder
	var wait *redis.Cmd
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = op(ctx, p)
		wait = p.Do(ctx, "wait", s.cfg.minReplicas, s.cfg.replicaTimeout.Milliseconds())
		return nil
	})
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	n, err := wait.Int64()
	if err != nil {
		return err
	}
	if int(n) < s.cfg.minReplicas {
		return fmt.Errorf("%w: written on the primary but confirmed by %d of %d replicas within %v",
			store.ErrUnavailable, n, s.cfg.minReplicas, s.cfg.replicaTimeout)
	}
	return nil
}

// primary is the client of the node that holds every key of the store.
func (s *Store) primary(ctx context.Context) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, s.tag)
	default:
		return nil, fmt.Errorf("min replicas: unsupported client %T", s.rdb)
	}
}

// movedSlot reports a Cluster redirection: the slot has a new primary.
func movedSlot(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK") ||
		redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "READONLY")
}

// runScript runs sc on c: EVALSHA with a fallback to EVAL on a client; EVAL
// in a pipeline, where a NOSCRIPT reply (a freshly promoted replica has an
// empty script cache) could not be retried within the pipeline.
func runScript(ctx context.Context, c redis.Cmdable, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	if _, ok := c.(redis.Pipeliner); ok {
		return sc.Eval(ctx, c, keys, args...)
	}
	return sc.Run(ctx, c, keys, args...)
}
