package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/store/epoch"
)

// openGuard starts watching a Redis store for lost data (DESIGN §12). The
// embedded store keeps its file open for the process's life, so it cannot
// lose data under a running gateway; it has no guard.
func (s *Server) openGuard(ctx context.Context) error {
	if len(s.cfg.Redis) == 0 {
		return nil
	}
	redis.SetLogger(redisLog{s.log})
	g, err := epoch.Open(ctx, s.store, epoch.WithLogger(s.log), epoch.WithObserver(func(lost, recovering bool) {
		if lost {
			metrics.StoreDataLost()
		}
		metrics.StoreRecovering(recovering)
	}), epoch.WithIntact(func() {
		// The streams as of the last check that found the store intact:
		// after a loss, the cache itself may already have been refreshed
		// from the emptied store.
		if s.streams != nil {
			names := s.streams.Cached()
			s.streamsBefore.Store(&names)
		}
	}))
	if err != nil {
		return fmt.Errorf("store epoch: %w", err)
	}
	if at := g.LostAt(); !at.IsZero() {
		s.log.Warn("the store lost data before this replica started; named subscribers without a cursor get a resync (store_lost) until the window ends",
			"lost_at", at, "window", s.cfg.StoreLossWindow)
	}
	s.guard = g
	return nil
}

// lostAt is when the store last lost data (zero: never, or no guard).
func (s *Server) lostAt() time.Time {
	if s.guard == nil {
		return time.Time{}
	}
	return s.guard.LostAt()
}

// recoverySteps registers what this replica restores after a loss, in
// order: the cursor signing key (tokens clients hold must stay valid), the
// streams file, a report of the streams that are gone, and the subscriber
// cursors this replica stored.
func (s *Server) recoverySteps(key []byte) {
	g := s.guard
	if g == nil {
		return
	}
	g.OnLoss("cursor signing key", func(ctx context.Context, _ epoch.Loss) error {
		return s.restoreCursorKey(ctx, key)
	})
	g.OnLoss("streams file", func(ctx context.Context, _ epoch.Loss) error {
		return s.restoreStreams(ctx)
	})
	g.OnLoss("subscriber cursors", func(ctx context.Context, _ epoch.Loss) error {
		return s.restoreCursors(ctx)
	})
}

// restoreCursorKey writes key back as the cursor signing key, unless
// another replica wrote one first: a different key is reported, since
// replicas then refuse each other's tokens.
func (s *Server) restoreCursorKey(ctx context.Context, key []byte) error {
	if s.cfg.CursorSecret != "" {
		return nil // not kept in the store
	}
	ok, err := s.store.PutIfAbsent(ctx, "meta", "cursor-key", key)
	if err != nil {
		return err
	}
	if ok {
		metrics.StoreRestored("cursor_key", 1)
		return nil
	}
	cur, err := s.store.Get(ctx, "meta", "cursor-key")
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, key) {
		s.log.Error("after the store lost data, a replica started and generated a new cursor signing key: tokens signed by replicas with different keys are refused by the others (400 invalid_cursor); restart every replica, and set --cursor-secret so that the key does not live in the store")
	}
	return nil
}

// restoreStreams loads the streams file again, if there is one, and
// reports the streams this replica knew that are still gone.
func (s *Server) restoreStreams(ctx context.Context) error {
	known := s.knownStreams()
	if s.cfg.StreamsFile != "" {
		n, err := s.streams.LoadFile(ctx, s.cfg.StreamsFile)
		if err != nil {
			return err
		}
		metrics.StoreRestored("streams", n)
		s.log.Warn("stream definitions restored from the streams file", "file", s.cfg.StreamsFile, "count", n)
	}
	have, err := s.streamNames(ctx)
	if err != nil {
		return err
	}
	var gone []string
	for _, n := range known {
		if !have[n] {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.log.Error("stream definitions lost with the store's data and not in --streams-file: recreate them (their readers get 404 meanwhile)", "streams", gone)
	}
	return nil
}

// knownStreams lists, sorted and once each, the streams this replica knew:
// at the last intact check, and what its cache still holds (no List may
// have run since the loss).
func (s *Server) knownStreams() []string {
	known := s.streams.Cached()
	if p := s.streamsBefore.Load(); p != nil {
		known = append(known, *p...)
	}
	slices.Sort(known)
	return slices.Compact(known)
}

// streamNames is the set of the streams the store defines.
func (s *Server) streamNames(ctx context.Context) (map[string]bool, error) {
	defs, err := s.streams.List(ctx)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, d := range defs {
		have[d.Name] = true
	}
	return have, nil
}

// restoreCursors writes back the subscriber cursors this replica stored,
// of the streams that still exist.
func (s *Server) restoreCursors(ctx context.Context) error {
	have, err := s.streamNames(ctx)
	if err != nil {
		return err
	}
	r, err := s.hub.Cursors().Restore(ctx, func(stream string) bool { return have[stream] })
	if err != nil {
		return err
	}
	metrics.StoreRestored("cursors", r.Written)
	s.log.Warn("subscriber cursors this replica stored written back after the store lost data",
		"written", r.Written, "already_current", r.Current, "stream_gone", r.Skipped, "incomplete", r.Incomplete)
	return nil
}

// runGuard checks the store until ctx ends; the returned function waits
// for it.
func (s *Server) runGuard(ctx context.Context) (wait func()) {
	if s.guard == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() { defer close(done); s.guard.Run(ctx) }()
	return func() { <-done }
}

// redisLog puts the Redis client library's messages (connection pool,
// Sentinel and Cluster topology changes) in the gateway's log, at debug
// level: the store's own errors are reported where they matter.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, slog.LevelDebug, "redis client: "+fmt.Sprintf(format, v...))
}
