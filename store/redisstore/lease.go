package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// nowMS is prepended to the lease scripts: expiry is always judged on the
// server's clock so that every replica sees the same answer. Scripts that
// call TIME and then write are fine since Redis 5 replicates script effects,
// not the script.
//
// Numbers are written with string.format('%d') because Lua's tostring would
// switch to exponent notation for large values.
const nowMS = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// appendScript: KEYS[1] log stream, KEYS[2] its counter; ARGV the values.
// Returns the last sequence number.
var appendScript = redis.NewScript(`
local n = #ARGV
local last = redis.call('INCRBY', KEYS[2], n)
for i = 1, n do
  redis.call('XADD', KEYS[1], '0-' .. string.format('%d', last - n + i), 'v', ARGV[i])
end
return last
`)

// acquireScript: KEYS[1] lease hash, KEYS[2] token counter; ARGV[1] holder,
// ARGV[2] ttl in ms. Returns {1, holder, token, exp} when acquired, or
// {0, holder, token, exp} of the current holder when held by someone else.
//
// A token is the counter plus one, but never less than the server's time
// in microseconds (milliseconds × 1000). Counting alone would hand out a
// token again if the counter were lost while a former holder still runs —
// a Redis restarted without persistence, or a failover to a replica that
// had not received the last increments — and that holder's fenced writes
// would pass again. Tokens derived from the clock are new after such a
// loss as long as leases are acquired less than 1000 times a millisecond
// and the server clock does not step back by more than the loss took.
// 2^53 (Lua numbers are doubles) is reached in the year 2255.
var acquireScript = redis.NewScript(nowMS + `
local now = now_ms()
local cur = redis.call('HMGET', KEYS[1], 'holder', 'token', 'exp')
if cur[1] and cur[1] ~= ARGV[1] and (tonumber(cur[3]) or 0) > now then
  return {0, cur[1], tonumber(cur[2]), tonumber(cur[3])}
end
local tok = redis.call('INCR', KEYS[2])
if tok < now * 1000 then
  tok = now * 1000
  redis.call('SET', KEYS[2], string.format('%d', tok))
end
local exp = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', string.format('%d', tok),
  'exp', string.format('%d', exp))
return {1, ARGV[1], tok, exp}
`)

// renewScript: KEYS[1] lease hash; ARGV[1] holder, ARGV[2] token, ARGV[3]
// ttl in ms. Returns the new expiry, or -1 if the lease is not held with
// that token (released, taken over or expired).
var renewScript = redis.NewScript(nowMS + `
local now = now_ms()
local cur = redis.call('HMGET', KEYS[1], 'holder', 'token', 'exp')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or (tonumber(cur[3]) or 0) <= now then
  return -1
end
local exp = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'exp', string.format('%d', exp))
return exp
`)

// releaseScript: KEYS[1] lease hash; ARGV[1] holder, ARGV[2] token. Returns
// 1 when released, 2 when it had expired (removed all the same: nobody else
// holds it), 0 when the token is not current.
var releaseScript = redis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'holder', 'token', 'exp')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
if (tonumber(cur[3]) or 0) <= now_ms() then
  return 2
end
return 1
`)

// fencedPutScript: KEYS[1] lease hash, KEYS[2] namespace hash; ARGV[1]
// token, ARGV[2] field, ARGV[3] value. Returns 1 if written, 0 if fenced.
var fencedPutScript = redis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'exp')
if cur[1] ~= ARGV[1] or (tonumber(cur[2]) or 0) <= now_ms() then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
`)

// fencedAppendScript: KEYS[1] lease hash, KEYS[2] log stream, KEYS[3] log
// sequence; ARGV[1] token, ARGV[2..] values. Returns the last sequence
// number, or -1 when fenced.
var fencedAppendScript = redis.NewScript(nowMS + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'exp')
if cur[1] ~= ARGV[1] or (tonumber(cur[2]) or 0) <= now_ms() then
  return -1
end
local n = #ARGV - 1
local last = redis.call('INCRBY', KEYS[3], n)
for i = 1, n do
  redis.call('XADD', KEYS[2], '0-' .. string.format('%d', last - n + i), 'v', ARGV[i + 1])
end
return last
`)

// AppendFenced implements store.Store.
func (s *Store) AppendFenced(ctx context.Context, log, lease string, token uint64, vals ...[]byte) (uint64, error) {
	ctx, cancel, err := s.begin(ctx, "fenced append", "log", log)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if lease == "" || len(vals) == 0 {
		return 0, fmt.Errorf("redisstore: fenced append to %q: empty lease name or no values", log)
	}
	args := make([]any, 0, len(vals)+1)
	args = append(args, strconv.FormatUint(token, 10))
	for _, v := range vals {
		args = append(args, v)
	}
	last, err := s.eval(ctx, fencedAppendScript, []string{s.leaseKey(lease), s.logKey(log), s.logSeqKey(log)}, args...).Int64()
	if err != nil {
		return 0, s.wrap(err, "fenced append to %q", log)
	}
	if last < 0 {
		return 0, fmt.Errorf("redisstore: fenced append to %q with lease %q token %d: %w", log, lease, token, store.ErrFenced)
	}
	return uint64(last), nil
}

// eval runs a writing script through write (so that it waits for replicas
// when asked to) and returns its reply.
func (s *Store) eval(ctx context.Context, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	var cmd *redis.Cmd
	err := s.write(ctx, func(ctx context.Context, c redis.Cmdable) redis.Cmder {
		cmd = runScript(ctx, c, sc, keys, args...)
		return cmd
	})
	if err != nil && (cmd == nil || cmd.Err() == nil) {
		// The script ran but the write was not confirmed (WAIT), or the
		// primary could not be found: the reply must not be used.
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

func ttlMS(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("lease ttl %v is shorter than 1ms", ttl)
	}
	return ttl.Milliseconds(), nil
}

// PutFenced implements store.Store.
func (s *Store) PutFenced(ctx context.Context, ns, key string, val []byte, lease string, token uint64) error {
	ctx, cancel, err := s.begin(ctx, "fenced put", "namespace", ns)
	if err != nil {
		return err
	}
	defer cancel()
	if lease == "" {
		return fmt.Errorf("redisstore: fenced put %q in %q: empty lease name", key, ns)
	}
	ok, err := s.eval(ctx, fencedPutScript, []string{s.leaseKey(lease), s.nsKey(ns)},
		strconv.FormatUint(token, 10), key, val).Int64()
	if err != nil {
		return s.wrap(err, "fenced put %q in %q", key, ns)
	}
	if ok != 1 {
		return fmt.Errorf("redisstore: fenced put %q in %q with lease %q token %d: %w", key, ns, lease, token, store.ErrFenced)
	}
	return nil
}

// AcquireLease implements store.Store.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	ctx, cancel, err := s.begin(ctx, "acquire", "lease", name)
	if err != nil {
		return store.Lease{}, err
	}
	defer cancel()
	if holder == "" {
		return store.Lease{}, fmt.Errorf("redisstore: acquire lease %q: empty holder", name)
	}
	ms, err := ttlMS(ttl)
	if err != nil {
		return store.Lease{}, fmt.Errorf("redisstore: acquire lease %q: %w", name, err)
	}
	res, err := s.eval(ctx, acquireScript, []string{s.leaseKey(name), s.leaseTokKey(name)}, holder, ms).Slice()
	if err != nil {
		return store.Lease{}, s.wrap(err, "acquire lease %q for %q", name, holder)
	}
	ok, l, err := parseLeaseReply(name, res)
	if err != nil {
		return store.Lease{}, fmt.Errorf("redisstore: acquire lease %q: %w", name, err)
	}
	if !ok {
		return store.Lease{}, fmt.Errorf("redisstore: acquire lease %q for %q: held by %q until %s: %w",
			name, holder, l.Holder, l.Expires.UTC().Format(time.RFC3339Nano), store.ErrLeaseHeld)
	}
	return l, nil
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	ctx, cancel, err := s.begin(ctx, "renew", "lease", l.Name)
	if err != nil {
		return store.Lease{}, err
	}
	defer cancel()
	ms, err := ttlMS(ttl)
	if err != nil {
		return store.Lease{}, fmt.Errorf("redisstore: renew lease %q: %w", l.Name, err)
	}
	exp, err := s.eval(ctx, renewScript, []string{s.leaseKey(l.Name)},
		l.Holder, strconv.FormatUint(l.Token, 10), ms).Int64()
	if err != nil {
		return store.Lease{}, s.wrap(err, "renew lease %q", l.Name)
	}
	if exp < 0 {
		return store.Lease{}, fmt.Errorf("redisstore: renew lease %q for %q token %d: %w", l.Name, l.Holder, l.Token, store.ErrLeaseLost)
	}
	l.Expires = time.UnixMilli(exp)
	return l, nil
}

// ReleaseLease implements store.Store.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	ctx, cancel, err := s.begin(ctx, "release", "lease", l.Name)
	if err != nil {
		return err
	}
	defer cancel()
	r, err := s.eval(ctx, releaseScript, []string{s.leaseKey(l.Name)},
		l.Holder, strconv.FormatUint(l.Token, 10)).Int64()
	if err != nil {
		return s.wrap(err, "release lease %q", l.Name)
	}
	switch r {
	case 1:
		return nil
	case 2:
		return fmt.Errorf("redisstore: release lease %q for %q token %d: had expired: %w", l.Name, l.Holder, l.Token, store.ErrLeaseLost)
	default:
		return fmt.Errorf("redisstore: release lease %q for %q token %d: %w", l.Name, l.Holder, l.Token, store.ErrLeaseLost)
	}
}

// GetLease implements store.Store.
func (s *Store) GetLease(ctx context.Context, name string) (store.Lease, error) {
	ctx, cancel, err := s.begin(ctx, "get", "lease", name)
	if err != nil {
		return store.Lease{}, err
	}
	defer cancel()
	vals, err := s.rdb.HMGet(ctx, s.leaseKey(name), "holder", "token", "exp").Result()
	if err != nil {
		return store.Lease{}, s.wrap(err, "get lease %q", name)
	}
	if len(vals) != 3 || vals[0] == nil {
		return store.Lease{}, fmt.Errorf("redisstore: get lease %q: %w", name, store.ErrNotFound)
	}
	l, err := leaseFrom(name, vals[0], vals[1], vals[2])
	if err != nil {
		return store.Lease{}, fmt.Errorf("redisstore: get lease %q: %w", name, err)
	}
	return l, nil
}

// parseLeaseReply decodes {ok, holder, token, exp} from acquireScript.
func parseLeaseReply(name string, res []any) (bool, store.Lease, error) {
	if len(res) != 4 {
		return false, store.Lease{}, fmt.Errorf("unexpected script reply %v", res)
	}
	ok, err := toInt64(res[0])
	if err != nil {
		return false, store.Lease{}, err
	}
	l, err := leaseFrom(name, res[1], res[2], res[3])
	return ok == 1, l, err
}

func leaseFrom(name string, holder, token, exp any) (store.Lease, error) {
	h, ok := holder.(string)
	if !ok {
		return store.Lease{}, fmt.Errorf("unexpected lease holder %v", holder)
	}
	tok, err := toInt64(token)
	if err != nil {
		return store.Lease{}, err
	}
	ms, err := toInt64(exp)
	if err != nil {
		return store.Lease{}, err
	}
	return store.Lease{Name: name, Holder: h, Token: uint64(tok), Expires: time.UnixMilli(ms)}, nil
}

func toInt64(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected number %q: %w", v, err)
		}
		return n, nil
	case nil:
		return 0, errors.New("missing number in lease record")
	default:
		return 0, fmt.Errorf("unexpected number %v (%T)", v, v)
	}
}
