// Package redisstore implements store.Store on Redis (6.2 or newer), for
// deployments where several gateway replicas share state: one server, a
// Redis Cluster or a Sentinel-managed primary (url.go). Calls that cannot
// reach Redis fail with store.ErrUnavailable within a call timeout
// (errors.go); writes can be made to wait for replicas (replicas.go).
//
// # Key layout
//
// Every key starts with the same hash tag, "{<prefix>}" (prefix "vsg" by
// default), so that all keys of one gateway hash to the same Redis Cluster
// slot and the Lua scripts that touch several keys (a lease and a namespace,
// a log and its counter) are legal on a cluster:
//
//	{vsg}:ns:<ns>           hash: one field per key of namespace <ns>
//	{vsg}:log:<name>        stream: entry IDs "0-<seq>", the value in field "v"
//	{vsg}:logseq:<name>     string: last sequence number handed out
//	{vsg}:lease:<name>      hash: holder, token, exp (Unix ms, server clock)
//	{vsg}:leasetok:<name>   string: last fencing token handed out
//
// The price of the single tag is that one gateway's state lives on one
// cluster shard; it is metadata and spools, small next to the change stream
// itself. Give each gateway deployment sharing a Redis its own prefix.
//
// Logs are streams with explicit IDs so that XRANGE reads after a sequence
// number and XTRIM MINID trims up to one in O(log n). The counter lives in a
// separate key rather than being derived from the stream's last entry because
// a log trimmed empty must still not hand the same numbers out again.
// DeleteLog removes both keys, which restarts numbering at 1.
//
// Lease expiry is decided inside Lua scripts on the Redis server's clock
// (TIME), never the caller's: replicas with skewed clocks still agree on who
// holds a lease. The token counter is a separate key so it survives release.
//
// The Redis server must not evict keys (maxmemory-policy noeviction, the
// default): losing a counter key while its log or lease remains would break
// the never-reused guarantees.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// DefaultPrefix is the key prefix used when WithPrefix is not given.
const DefaultPrefix = "vsg"

// Option configures a Store.
type Option func(*config)

type config struct {
	prefix         string
	callTimeout    time.Duration
	minReplicas    int
	replicaTimeout time.Duration
}

// WithPrefix sets the key prefix, which becomes the hash tag of every key.
// It must be non-empty and must not contain '{' or '}'.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// DefaultCallTimeout bounds every call when WithCallTimeout is not given.
const DefaultCallTimeout = 5 * time.Second

// WithCallTimeout bounds every call, retries by the client library
// included: a server that does not answer (paused, partitioned) makes calls
// fail with store.ErrUnavailable after d rather than after the library's
// read timeout times its retries. 0 leaves calls bounded by their context
// only.
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) { c.callTimeout = d }
}

// Store is a store.Store backed by Redis.
type Store struct {
	rdb       redis.UniversalClient
	ownClient bool
	tag       string // "{prefix}"
	cfg       config
	closed    atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New connects to the Redis deployment at url (any form Dial takes) and
// checks that it is reachable and recent enough within ctx.
func New(ctx context.Context, url string, opts ...Option) (*Store, error) {
	return Dial(ctx, []string{url}, opts...)
}

// NewFromClient uses an existing client, e.g. a *redis.ClusterClient or a
// Sentinel failover client. The caller keeps ownership: Close does not close
// c.
func NewFromClient(ctx context.Context, c redis.UniversalClient, opts ...Option) (*Store, error) {
	return newStore(ctx, c, false, opts)
}

func newStore(ctx context.Context, c redis.UniversalClient, own bool, opts []Option) (*Store, error) {
	cfg := config{prefix: DefaultPrefix, callTimeout: DefaultCallTimeout, replicaTimeout: DefaultReplicaTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	fail := func(err error) (*Store, error) {
		if own {
			_ = c.Close()
		}
		return nil, err
	}
	if cfg.prefix == "" || strings.ContainsAny(cfg.prefix, "{}") {
		return fail(fmt.Errorf("redisstore: invalid key prefix %q: must be non-empty without braces", cfg.prefix))
	}
	if err := cfg.checkReplicas(c); err != nil {
		return fail(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		if unavailable(err) {
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return fail(fmt.Errorf("redisstore: ping: %w", err))
	}
	if err := checkVersion(ctx, c); err != nil {
		return fail(err)
	}
	return &Store{rdb: c, ownClient: own, tag: "{" + cfg.prefix + "}", cfg: cfg}, nil
}

// checkVersion refuses servers older than 6.2 (XTRIM MINID appeared there)
// with a clear message at startup instead of a syntax error on the first
// trim. Servers that hide INFO are let through.
func checkVersion(ctx context.Context, c redis.UniversalClient) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			return nil
		}
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			return nil
		}
		if major < 6 || (major == 6 && minor < 2) {
			return fmt.Errorf("redisstore: redis %s is too old: 6.2 or newer is required", v)
		}
		return nil
	}
	return nil
}

func (s *Store) nsKey(ns string) string         { return s.tag + ":ns:" + ns }
func (s *Store) logKey(name string) string      { return s.tag + ":log:" + name }
func (s *Store) logSeqKey(name string) string   { return s.tag + ":logseq:" + name }
func (s *Store) leaseKey(name string) string    { return s.tag + ":lease:" + name }
func (s *Store) leaseTokKey(name string) string { return s.tag + ":leasetok:" + name }

// begin is called first by every method. A canceled context is reported
// before any command is sent, so that such a call never writes. The
// context it returns carries the call timeout; cancel must be called.
func (s *Store) begin(ctx context.Context, op, kind, name string) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, fmt.Errorf("redisstore: %s: %w", op, store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if name == "" {
		return nil, nil, fmt.Errorf("redisstore: %s: empty %s name", op, kind)
	}
	if s.cfg.callTimeout <= 0 {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout)
	return ctx, cancel, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, ns, key string) ([]byte, error) {
	ctx, cancel, err := s.begin(ctx, "get", "namespace", ns)
	if err != nil {
		return nil, err
	}
	defer cancel()
	v, err := s.rdb.HGet(ctx, s.nsKey(ns), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisstore: get %q in %q: %w", key, ns, store.ErrNotFound)
	}
	if err != nil {
		return nil, s.wrap(err, "get %q in %q", key, ns)
	}
	return v, nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, ns, key string, val []byte) error {
	ctx, cancel, err := s.begin(ctx, "put", "namespace", ns)
	if err != nil {
		return err
	}
	defer cancel()
	err = s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		return c.HSet(ctx, s.nsKey(ns), key, val)
	})
	if err != nil {
		return s.wrap(err, "put %q in %q", key, ns)
	}
	return nil
}

// PutIfAbsent implements store.Store.
func (s *Store) PutIfAbsent(ctx context.Context, ns, key string, val []byte) (bool, error) {
	ctx, cancel, err := s.begin(ctx, "put-if-absent", "namespace", ns)
	if err != nil {
		return false, err
	}
	defer cancel()
	var cmd *redis.BoolCmd
	err = s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		cmd = c.HSetNX(ctx, s.nsKey(ns), key, val)
		return cmd
	})
	if err != nil {
		return false, s.wrap(err, "put-if-absent %q in %q", key, ns)
	}
	return cmd.Val(), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, ns, key string) error {
	ctx, cancel, err := s.begin(ctx, "delete", "namespace", ns)
	if err != nil {
		return err
	}
	defer cancel()
	err = s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		return c.HDel(ctx, s.nsKey(ns), key)
	})
	if err != nil {
		return s.wrap(err, "delete %q in %q", key, ns)
	}
	return nil
}

// List implements store.Store. Namespaces are expected to hold at most a few
// thousand records (stream definitions, cursors), so one HGETALL is fine.
func (s *Store) List(ctx context.Context, ns string) ([]store.Record, error) {
	ctx, cancel, err := s.begin(ctx, "list", "namespace", ns)
	if err != nil {
		return nil, err
	}
	defer cancel()
	m, err := s.rdb.HGetAll(ctx, s.nsKey(ns)).Result()
	if err != nil {
		return nil, s.wrap(err, "list %q", ns)
	}
	recs := make([]store.Record, 0, len(m))
	for k, v := range m {
		recs = append(recs, store.Record{Key: k, Value: []byte(v)})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Key < recs[j].Key })
	return recs, nil
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, log string, vals ...[]byte) (uint64, error) {
	ctx, cancel, err := s.begin(ctx, "append", "log", log)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if len(vals) == 0 {
		n, err := s.rdb.Get(ctx, s.logSeqKey(log)).Uint64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		if err != nil {
			return 0, s.wrap(err, "append to %q", log)
		}
		return n, nil
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	var cmd *redis.Cmd
	err = s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		cmd = runScript(ctx, c, appendScript, []string{s.logKey(log), s.logSeqKey(log)}, args...)
		return cmd
	})
	if err != nil {
		return 0, s.wrap(err, "append to %q", log)
	}
	last, err := cmd.Int64()
	if err != nil {
		return 0, fmt.Errorf("redisstore: append to %q: %w", log, err)
	}
	return uint64(last), nil
}

// ReadLog implements store.Store.
func (s *Store) ReadLog(ctx context.Context, log string, after uint64, limit int) ([]store.Entry, error) {
	ctx, cancel, err := s.begin(ctx, "read", "log", log)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if after == math.MaxUint64 {
		return nil, nil
	}
	start := streamID(after + 1)
	var cmd *redis.XMessageSliceCmd
	if limit > 0 {
		cmd = s.rdb.XRangeN(ctx, s.logKey(log), start, "+", int64(limit))
	} else {
		cmd = s.rdb.XRange(ctx, s.logKey(log), start, "+")
	}
	msgs, err := cmd.Result()
	if err != nil {
		return nil, s.wrap(err, "read %q after %d", log, after)
	}
	out := make([]store.Entry, 0, len(msgs))
	for _, m := range msgs {
		seq, err := parseStreamID(m.ID)
		if err != nil {
			return nil, fmt.Errorf("redisstore: read %q: %w", log, err)
		}
		v, _ := m.Values["v"].(string)
		out = append(out, store.Entry{Seq: seq, Value: []byte(v)})
	}
	return out, nil
}

// TrimLog implements store.Store.
func (s *Store) TrimLog(ctx context.Context, log string, upTo uint64) error {
	ctx, cancel, err := s.begin(ctx, "trim", "log", log)
	if err != nil {
		return err
	}
	defer cancel()
	if upTo == 0 {
		return nil
	}
	err = s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		if upTo == math.MaxUint64 {
			return c.XTrimMaxLen(ctx, s.logKey(log), 0)
		}
		// MINID keeps entries with ID >= the threshold; exact (not "~")
		// trimming so that reads never see trimmed entries.
		return c.XTrimMinID(ctx, s.logKey(log), streamID(upTo+1))
	})
	if err != nil {
		return s.wrap(err, "trim %q up to %d", log, upTo)
	}
	return nil
}

// DeleteLog implements store.Store.
func (s *Store) DeleteLog(ctx context.Context, log string) error {
	ctx, cancel, err := s.begin(ctx, "delete", "log", log)
	if err != nil {
		return err
	}
	defer cancel()
	// Both keys share the hash tag, so one DEL removes them atomically.
	err = s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		return c.Del(ctx, s.logKey(log), s.logSeqKey(log))
	})
	if err != nil {
		return s.wrap(err, "delete log %q", log)
	}
	return nil
}

// LogLen implements store.Store.
func (s *Store) LogLen(ctx context.Context, log string) (int, error) {
	ctx, cancel, err := s.begin(ctx, "len", "log", log)
	if err != nil {
		return 0, err
	}
	defer cancel()
	n, err := s.rdb.XLen(ctx, s.logKey(log)).Result()
	if err != nil {
		return 0, s.wrap(err, "len %q", log)
	}
	return int(n), nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("redisstore: ping: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return s.wrap(err, "ping")
	}
	return nil
}

// Close implements store.Store. It closes the client only if New created it.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.ownClient {
		if err := s.rdb.Close(); err != nil {
			return fmt.Errorf("redisstore: close: %w", err)
		}
	}
	return nil
}

// streamID is the stream entry ID of a sequence number. The millisecond part
// is always 0: IDs are ours, not timestamps.
func streamID(seq uint64) string { return "0-" + strconv.FormatUint(seq, 10) }

func parseStreamID(id string) (uint64, error) {
	rest, ok := strings.CutPrefix(id, "0-")
	if !ok {
		return 0, fmt.Errorf("unexpected stream entry id %q", id)
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("unexpected stream entry id %q: %w", id, err)
	}
	return seq, nil
}
