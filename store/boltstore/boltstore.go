// Package boltstore implements store.Store in an embedded bbolt file, for a
// gateway running as a single process without Redis.
//
// # Layout
//
// Top-level buckets:
//
//	meta      "version" → format version (1)
//	ns        one nested bucket per namespace; keys are 0x00 + record key
//	log       one nested bucket per log; keys are big-endian uint64 seq
//	lease     lease name → token (8) | expiry Unix ns (8) | holder
//	leasetok  lease name → last fencing token handed out (8)
//
// Record keys carry a one-byte prefix because bbolt refuses empty keys while
// the store contract allows them; the prefix keeps byte order, so List is a
// plain cursor walk. A log's sequence counter is its bucket's sequence
// (NextSequence): trimming deletes keys but keeps the bucket and therefore
// the counter, while DeleteLog drops the bucket and so restarts at 1, as the
// store contract says. Entries are always a contiguous run (appends add at
// the end, trims remove a prefix), so LogLen is last-first+1.
//
// Leases use the local wall clock: there is one process, so there is no skew
// to guard against. The token counter is kept apart from the lease record so
// it survives release.
package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// ErrLocked is returned by Open when another process holds the file.
var ErrLocked = errors.New("boltstore: database file is locked by another process")

// DefaultLockTimeout is how long Open waits for the file lock.
const DefaultLockTimeout = 2 * time.Second

const formatVersion = 1

var (
	bucketMeta     = []byte("meta")
	bucketNS       = []byte("ns")
	bucketLog      = []byte("log")
	bucketLease    = []byte("lease")
	bucketLeaseTok = []byte("leasetok")
	keyVersion     = []byte("version")
)

// Option configures Open.
type Option func(*config)

type config struct {
	lockTimeout time.Duration
	mode        os.FileMode
	noSync      bool
}

// WithLockTimeout sets how long Open waits for another process to release
// the file before failing with ErrLocked (default DefaultLockTimeout).
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) { c.lockTimeout = d }
}

// WithFileMode sets the permissions of a newly created file (default 0600).
func WithFileMode(m os.FileMode) Option {
	return func(c *config) { c.mode = m }
}

// WithNoSync skips fsync on commit. Writes then survive a process crash but
// not a power loss or kernel crash; meant for tests and benchmarks.
func WithNoSync() Option {
	return func(c *config) { c.noSync = true }
}

// Store is a store.Store backed by a bbolt file.
type Store struct {
	db     *bolt.DB
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the store file at path. If another process has it
// open, Open fails with ErrLocked after the lock timeout instead of hanging.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := config{lockTimeout: DefaultLockTimeout, mode: 0o600}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.lockTimeout <= 0 {
		// bbolt treats 0 as "wait forever", which is exactly the hang this
		// option exists to prevent.
		cfg.lockTimeout = DefaultLockTimeout
	}
	db, err := bolt.Open(path, cfg.mode, &bolt.Options{Timeout: cfg.lockTimeout, NoSync: cfg.noSync})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %v)", ErrLocked, path, cfg.lockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketNS, bucketLog, bucketLease, bucketLeaseTok} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyVersion); v != nil {
			if len(v) != 8 || binary.BigEndian.Uint64(v) != formatVersion {
				return fmt.Errorf("unsupported format version %x (want %d)", v, formatVersion)
			}
			return nil
		}
		return meta.Put(keyVersion, u64(formatVersion))
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// begin is called first by every method.
func (s *Store) begin(ctx context.Context, op, kind, name string) error {
	if s.closed.Load() {
		return fmt.Errorf("boltstore: %s: %w", op, store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: %s: %w", op, err)
	}
	if name == "" {
		return fmt.Errorf("boltstore: %s: empty %s name", op, kind)
	}
	return nil
}

// wrap adds context to an error. A call that fails because Close ran
// underneath it reports store.ErrClosed, whatever the client library said.
func (s *Store) wrap(err error, format string, args ...any) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) || (s.closed.Load() && !isSentinel(err)) {
		return fmt.Errorf("boltstore: "+format+": %w (%v)", append(args, store.ErrClosed, err)...)
	}
	return fmt.Errorf("boltstore: "+format+": %w", append(args, err)...)
}

// isSentinel reports whether err is an answer from the store rather than a
// failure to get one.
func isSentinel(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseHeld) ||
		errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrFenced) ||
		errors.Is(err, store.ErrClosed)
}

func recKey(key string) []byte {
	b := make([]byte, 1+len(key))
	copy(b[1:], key)
	return b
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, ns, key string) ([]byte, error) {
	if err := s.begin(ctx, "get", "namespace", ns); err != nil {
		return nil, err
	}
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketNS).Bucket([]byte(ns))
		if b == nil {
			return store.ErrNotFound
		}
		v := b.Get(recKey(key))
		if v == nil {
			return store.ErrNotFound
		}
		out = clone(v) // v is only valid inside the transaction
		return nil
	})
	if err != nil {
		return nil, s.wrap(err, "get %q in %q", key, ns)
	}
	return out, nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, ns, key string, val []byte) error {
	if err := s.begin(ctx, "put", "namespace", ns); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return putRecord(tx, ns, key, val) })
	if err != nil {
		return s.wrap(err, "put %q in %q", key, ns)
	}
	return nil
}

func putRecord(tx *bolt.Tx, ns, key string, val []byte) error {
	b, err := tx.Bucket(bucketNS).CreateBucketIfNotExists([]byte(ns))
	if err != nil {
		return err
	}
	return b.Put(recKey(key), clone(val))
}

// PutIfAbsent implements store.Store.
func (s *Store) PutIfAbsent(ctx context.Context, ns, key string, val []byte) (bool, error) {
	if err := s.begin(ctx, "put-if-absent", "namespace", ns); err != nil {
		return false, err
	}
	var put bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketNS).Bucket([]byte(ns)); b != nil && b.Get(recKey(key)) != nil {
			return nil
		}
		put = true
		return putRecord(tx, ns, key, val)
	})
	if err != nil {
		return false, s.wrap(err, "put-if-absent %q in %q", key, ns)
	}
	return put, nil
}

// Delete implements store.Store. An emptied namespace bucket is dropped so
// that short-lived namespaces do not accumulate, mirroring Redis, where an
// empty hash ceases to exist.
func (s *Store) Delete(ctx context.Context, ns, key string) error {
	if err := s.begin(ctx, "delete", "namespace", ns); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		parent := tx.Bucket(bucketNS)
		b := parent.Bucket([]byte(ns))
		if b == nil {
			return nil
		}
		if err := b.Delete(recKey(key)); err != nil {
			return err
		}
		if k, _ := b.Cursor().First(); k == nil {
			return parent.DeleteBucket([]byte(ns))
		}
		return nil
	})
	if err != nil {
		return s.wrap(err, "delete %q in %q", key, ns)
	}
	return nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, ns string) ([]store.Record, error) {
	if err := s.begin(ctx, "list", "namespace", ns); err != nil {
		return nil, err
	}
	var out []store.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketNS).Bucket([]byte(ns))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out = append(out, store.Record{Key: string(k[1:]), Value: clone(v)})
			return nil
		})
	})
	if err != nil {
		return nil, s.wrap(err, "list %q", ns)
	}
	return out, nil
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, log string, vals ...[]byte) (uint64, error) {
	if err := s.begin(ctx, "append", "log", log); err != nil {
		return 0, err
	}
	var last uint64
	var err error
	if len(vals) == 0 {
		err = s.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bucketLog).Bucket([]byte(log)); b != nil {
				last = b.Sequence()
			}
			return nil
		})
	} else {
		err = s.db.Update(func(tx *bolt.Tx) error {
			var err error
			last, err = appendTx(tx, log, vals)
			return err
		})
	}
	if err != nil {
		return 0, s.wrap(err, "append to %q", log)
	}
	return last, nil
}

// appendTx appends vals to log within tx and returns the last sequence.
func appendTx(tx *bolt.Tx, log string, vals [][]byte) (uint64, error) {
	b, err := tx.Bucket(bucketLog).CreateBucketIfNotExists([]byte(log))
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, v := range vals {
		if last, err = b.NextSequence(); err != nil {
			return 0, err
		}
		if err := b.Put(u64(last), clone(v)); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// ReadLog implements store.Store.
func (s *Store) ReadLog(ctx context.Context, log string, after uint64, limit int) ([]store.Entry, error) {
	if err := s.begin(ctx, "read", "log", log); err != nil {
		return nil, err
	}
	var out []store.Entry
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLog).Bucket([]byte(log))
		if b == nil || after == ^uint64(0) {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			out = append(out, store.Entry{Seq: binary.BigEndian.Uint64(k), Value: clone(v)})
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap(err, "read %q after %d", log, after)
	}
	return out, nil
}

// TrimLog implements store.Store.
func (s *Store) TrimLog(ctx context.Context, log string, upTo uint64) error {
	if err := s.begin(ctx, "trim", "log", log); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLog).Bucket([]byte(log))
		if b == nil {
			return nil
		}
		// Re-seek after every delete: a bbolt cursor is not guaranteed to
		// stay on the right element across deletions.
		for {
			k, _ := b.Cursor().First()
			if k == nil || binary.BigEndian.Uint64(k) > upTo {
				return nil
			}
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return s.wrap(err, "trim %q up to %d", log, upTo)
	}
	return nil
}

// DeleteLog implements store.Store.
func (s *Store) DeleteLog(ctx context.Context, log string) error {
	if err := s.begin(ctx, "delete", "log", log); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketLog).DeleteBucket([]byte(log))
		if errors.Is(err, berrors.ErrBucketNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return s.wrap(err, "delete log %q", log)
	}
	return nil
}

// LogLen implements store.Store.
func (s *Store) LogLen(ctx context.Context, log string) (int, error) {
	if err := s.begin(ctx, "len", "log", log); err != nil {
		return 0, err
	}
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLog).Bucket([]byte(log))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		first, _ := c.First()
		last, _ := c.Last()
		if first != nil {
			n = int(binary.BigEndian.Uint64(last) - binary.BigEndian.Uint64(first) + 1)
		}
		return nil
	})
	if err != nil {
		return 0, s.wrap(err, "len %q", log)
	}
	return n, nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("boltstore: ping: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: ping: %w", err)
	}
	if err := s.db.View(func(*bolt.Tx) error { return nil }); err != nil {
		return s.wrap(err, "ping")
	}
	return nil
}

// Close implements store.Store. It waits for running transactions.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("boltstore: close: %w", err)
	}
	return nil
}
