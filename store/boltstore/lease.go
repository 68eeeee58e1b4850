package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// leaseRec is the stored form of a lease: token (8) | expiry Unix ns (8) |
// holder bytes.
type leaseRec struct {
	holder string
	token  uint64
	exp    int64
}

func (r leaseRec) encode() []byte {
	b := make([]byte, 16+len(r.holder))
	binary.BigEndian.PutUint64(b, r.token)
	binary.BigEndian.PutUint64(b[8:], uint64(r.exp))
	copy(b[16:], r.holder)
	return b
}

func decodeLease(b []byte) (leaseRec, error) {
	if len(b) < 16 {
		return leaseRec{}, fmt.Errorf("corrupt lease record (%d bytes)", len(b))
	}
	return leaseRec{
		token:  binary.BigEndian.Uint64(b),
		exp:    int64(binary.BigEndian.Uint64(b[8:])),
		holder: string(b[16:]),
	}, nil
}

// live reports whether the lease is unexpired at now (in Unix ns). Expiry is
// inclusive, like in the Redis store: at exactly exp the lease is gone.
func (r leaseRec) live(now int64) bool { return now < r.exp }

func (r leaseRec) lease(name string) store.Lease {
	return store.Lease{Name: name, Holder: r.holder, Token: r.token, Expires: time.Unix(0, r.exp)}
}

// getLease reads a lease inside tx; ok is false if there is none.
func getLease(tx *bolt.Tx, name string) (leaseRec, bool, error) {
	v := tx.Bucket(bucketLease).Get([]byte(name))
	if v == nil {
		return leaseRec{}, false, nil
	}
	r, err := decodeLease(v)
	return r, err == nil, err
}

func checkTTL(ttl time.Duration) error {
	// The Redis store works in milliseconds; refusing shorter TTLs here too
	// keeps both stores accepting exactly the same arguments.
	if ttl < time.Millisecond {
		return fmt.Errorf("lease ttl %v is shorter than 1ms", ttl)
	}
	return nil
}

// expiry is now+ttl, saturating so that an absurdly long TTL means "never"
// rather than wrapping around into the past.
func expiry(now int64, ttl time.Duration) int64 {
	if exp := now + int64(ttl); exp >= now {
		return exp
	}
	return math.MaxInt64
}

// PutFenced implements store.Store.
func (s *Store) PutFenced(ctx context.Context, ns, key string, val []byte, lease string, token uint64) error {
	if err := s.begin(ctx, "fenced put", "namespace", ns); err != nil {
		return err
	}
	if lease == "" {
		return fmt.Errorf("boltstore: fenced put %q in %q: empty lease name", key, ns)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := checkFence(tx, lease, token); err != nil {
			return err
		}
		return putRecord(tx, ns, key, val)
	})
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("boltstore: fenced put %q in %q with lease %q token %d: %w", key, ns, lease, token, err)
	}
	if err != nil {
		return s.wrap(err, "fenced put %q in %q", key, ns)
	}
	return nil
}

// checkFence returns store.ErrFenced unless lease is live with token.
func checkFence(tx *bolt.Tx, lease string, token uint64) error {
	r, ok, err := getLease(tx, lease)
	if err != nil {
		return err
	}
	if !ok || r.token != token || !r.live(time.Now().UnixNano()) {
		return store.ErrFenced
	}
	return nil
}

// AppendFenced implements store.Store.
func (s *Store) AppendFenced(ctx context.Context, log, lease string, token uint64, vals ...[]byte) (uint64, error) {
	if err := s.begin(ctx, "fenced append", "log", log); err != nil {
		return 0, err
	}
	if lease == "" || len(vals) == 0 {
		return 0, fmt.Errorf("boltstore: fenced append to %q: empty lease name or no values", log)
	}
	var last uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := checkFence(tx, lease, token); err != nil {
			return err
		}
		var err error
		last, err = appendTx(tx, log, vals)
		return err
	})
	if errors.Is(err, store.ErrFenced) {
		return 0, fmt.Errorf("boltstore: fenced append to %q with lease %q token %d: %w", log, lease, token, err)
	}
	if err != nil {
		return 0, s.wrap(err, "fenced append to %q", log)
	}
	return last, nil
}

// AcquireLease implements store.Store.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if err := s.begin(ctx, "acquire", "lease", name); err != nil {
		return store.Lease{}, err
	}
	if holder == "" {
		return store.Lease{}, fmt.Errorf("boltstore: acquire lease %q: empty holder", name)
	}
	if err := checkTTL(ttl); err != nil {
		return store.Lease{}, fmt.Errorf("boltstore: acquire lease %q: %w", name, err)
	}
	var got, cur leaseRec
	err := s.db.Update(func(tx *bolt.Tx) error {
		now := time.Now().UnixNano()
		var ok bool
		var err error
		cur, ok, err = getLease(tx, name)
		if err != nil {
			return err
		}
		if ok && cur.holder != holder && cur.live(now) {
			return store.ErrLeaseHeld
		}
		toks := tx.Bucket(bucketLeaseTok)
		var tok uint64
		if v := toks.Get([]byte(name)); len(v) == 8 {
			tok = binary.BigEndian.Uint64(v)
		}
		tok++
		if err := toks.Put([]byte(name), u64(tok)); err != nil {
			return err
		}
		got = leaseRec{holder: holder, token: tok, exp: expiry(now, ttl)}
		return tx.Bucket(bucketLease).Put([]byte(name), got.encode())
	})
	if errors.Is(err, store.ErrLeaseHeld) {
		return store.Lease{}, fmt.Errorf("boltstore: acquire lease %q for %q: held by %q until %s: %w",
			name, holder, cur.holder, time.Unix(0, cur.exp).UTC().Format(time.RFC3339Nano), err)
	}
	if err != nil {
		return store.Lease{}, s.wrap(err, "acquire lease %q for %q", name, holder)
	}
	return got.lease(name), nil
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if err := s.begin(ctx, "renew", "lease", l.Name); err != nil {
		return store.Lease{}, err
	}
	if err := checkTTL(ttl); err != nil {
		return store.Lease{}, fmt.Errorf("boltstore: renew lease %q: %w", l.Name, err)
	}
	var got leaseRec
	err := s.db.Update(func(tx *bolt.Tx) error {
		now := time.Now().UnixNano()
		r, ok, err := getLease(tx, l.Name)
		if err != nil {
			return err
		}
		if !ok || r.holder != l.Holder || r.token != l.Token || !r.live(now) {
			return store.ErrLeaseLost
		}
		r.exp = expiry(now, ttl)
		got = r
		return tx.Bucket(bucketLease).Put([]byte(l.Name), r.encode())
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return store.Lease{}, fmt.Errorf("boltstore: renew lease %q for %q token %d: %w", l.Name, l.Holder, l.Token, err)
	}
	if err != nil {
		return store.Lease{}, s.wrap(err, "renew lease %q", l.Name)
	}
	return got.lease(l.Name), nil
}

// ReleaseLease implements store.Store.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	if err := s.begin(ctx, "release", "lease", l.Name); err != nil {
		return err
	}
	expired := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		r, ok, err := getLease(tx, l.Name)
		if err != nil {
			return err
		}
		if !ok || r.holder != l.Holder || r.token != l.Token {
			return store.ErrLeaseLost
		}
		// An expired lease still carrying the caller's token is removed all
		// the same: nobody else holds it.
		expired = !r.live(time.Now().UnixNano())
		return tx.Bucket(bucketLease).Delete([]byte(l.Name))
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("boltstore: release lease %q for %q token %d: %w", l.Name, l.Holder, l.Token, err)
	}
	if err != nil {
		return s.wrap(err, "release lease %q", l.Name)
	}
	if expired {
		return fmt.Errorf("boltstore: release lease %q for %q token %d: had expired: %w", l.Name, l.Holder, l.Token, store.ErrLeaseLost)
	}
	return nil
}

// GetLease implements store.Store.
func (s *Store) GetLease(ctx context.Context, name string) (store.Lease, error) {
	if err := s.begin(ctx, "get", "lease", name); err != nil {
		return store.Lease{}, err
	}
	var r leaseRec
	err := s.db.View(func(tx *bolt.Tx) error {
		var ok bool
		var err error
		r, ok, err = getLease(tx, name)
		if err == nil && !ok {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return store.Lease{}, s.wrap(err, "get lease %q", name)
	}
	return r.lease(name), nil
}
