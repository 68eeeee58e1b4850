package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// CompareAndSwap implements store.Store.
func (s *Store) CompareAndSwap(ctx context.Context, ns, key string, old, val []byte) (bool, error) {
	return s.cas(ctx, "compare-and-swap", ns, key, old, val, "", 0)
}

// CompareAndSwapFenced implements store.Store.
func (s *Store) CompareAndSwapFenced(ctx context.Context, ns, key string, old, val []byte, lease string, token uint64) (bool, error) {
	if lease == "" {
		return false, fmt.Errorf("boltstore: fenced compare-and-swap %q in %q: empty lease name", key, ns)
	}
	return s.cas(ctx, "fenced compare-and-swap", ns, key, old, val, lease, token)
}

// cas compares and writes in one read-write transaction, which bbolt
// runs one at a time: nothing can write between the two. It checks the
// lease first when lease is not empty.
func (s *Store) cas(ctx context.Context, op, ns, key string, old, val []byte, lease string, token uint64) (bool, error) {
	if err := s.begin(ctx, op, "namespace", ns); err != nil {
		return false, err
	}
	var swapped bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		if lease != "" {
			if err := checkFence(tx, lease, token); err != nil {
				return err
			}
		}
		var cur []byte
		if b := tx.Bucket(bucketNS).Bucket([]byte(ns)); b != nil {
			cur = b.Get(recKey(key))
		}
		// bbolt returns a non-nil empty slice for an empty value and nil
		// for a missing key, the distinction old makes.
		if (old == nil) != (cur == nil) || !bytes.Equal(old, cur) {
			return nil
		}
		swapped = true
		return putRecord(tx, ns, key, val)
	})
	if errors.Is(err, store.ErrFenced) {
		return false, fmt.Errorf("boltstore: %s %q in %q with lease %q token %d: %w", op, key, ns, lease, token, err)
	}
	if err != nil {
		return false, s.wrap(err, "%s %q in %q", op, key, ns)
	}
	return swapped, nil
}
