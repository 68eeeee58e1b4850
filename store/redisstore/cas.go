package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// casScript: KEYS[1] namespace hash, KEYS[2] (fenced only) lease hash;
// ARGV[1] field, ARGV[2] "1" when the field must hold ARGV[3] or "0" when
// it must be absent, ARGV[4] the new value, ARGV[5] (fenced only) token.
// Returns 1 when swapped, 0 when the value differs, -1 when fenced.
//
// One script for both: a fenced swap is the plain one behind PutFenced's
// check. The lease hash and the namespace share the store's hash tag, so
// the script is legal on a Cluster, like fencedPutScript.
var casScript = redis.NewScript(nowMS + `
if #KEYS == 2 then
  local l = redis.call('HMGET', KEYS[2], 'token', 'exp')
  if l[1] ~= ARGV[5] or (tonumber(l[2]) or 0) <= now_ms() then
    return -1
  end
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '0' then
  if cur then return 0 end
elseif cur ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return 1
`)

// CompareAndSwap implements store.Store.
func (s *Store) CompareAndSwap(ctx context.Context, ns, key string, old, val []byte) (bool, error) {
	return s.cas(ctx, "compare-and-swap", ns, key, old, val, "", 0)
}

// CompareAndSwapFenced implements store.Store.
func (s *Store) CompareAndSwapFenced(ctx context.Context, ns, key string, old, val []byte, lease string, token uint64) (bool, error) {
	if lease == "" {
		return false, fmt.Errorf("redisstore: fenced compare-and-swap %q in %q: empty lease name", key, ns)
	}
	return s.cas(ctx, "fenced compare-and-swap", ns, key, old, val, lease, token)
}

// cas runs casScript, fenced by lease when it is not empty.
func (s *Store) cas(ctx context.Context, op, ns, key string, old, val []byte, lease string, token uint64) (bool, error) {
	ctx, cancel, err := s.begin(ctx, op, "namespace", ns)
	if err != nil {
		return false, err
	}
	defer cancel()
	keys := []string{s.nsKey(ns)}
	args := []any{key, "0", "", val}
	if old != nil {
		args[1], args[2] = "1", old
	}
	if lease != "" {
		keys = append(keys, s.leaseKey(lease))
		args = append(args, strconv.FormatUint(token, 10))
	}
	r, err := s.eval(ctx, casScript, keys, args...).Int64()
	if err != nil {
		return false, s.wrap(err, "%s %q in %q", op, key, ns)
	}
	if r < 0 {
		return false, fmt.Errorf("redisstore: %s %q in %q with lease %q token %d: %w", op, key, ns, lease, token, store.ErrFenced)
	}
	return r == 1, nil
}
