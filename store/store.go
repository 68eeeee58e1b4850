// Package store holds the gateway's durable state: stream definitions,
// subscriber cursors, reshard journals, spools, webhooks and leases.
//
// The interface is deliberately small and value-agnostic (bytes in, bytes
// out) so that the two implementations — Redis for replicated deployments and
// an embedded bbolt file for a single process — can be proven identical by one
// shared test suite (store/storetest). Typed repositories live with the code
// that owns the data.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Implementations wrap or return these unchanged so callers
// can use errors.Is.
var (
	// ErrNotFound is returned when a record, log or lease does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrLeaseHeld is returned by AcquireLease while another holder owns an
	// unexpired lease.
	ErrLeaseHeld = errors.New("store: lease held by another holder")
	// ErrLeaseLost is returned by RenewLease and ReleaseLease when the caller
	// no longer holds the lease (it expired and was taken over, or the token is
	// stale).
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrFenced is returned by fenced writes when the fencing token is not the
	// current token of the named lease: a paused or partitioned former holder
	// must never overwrite what the new holder wrote.
	ErrFenced = errors.New("store: write fenced by a newer lease holder")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable wraps failures to reach the store (connection refused
	// or reset, timeouts, a server that is loading, read-only or has no
	// primary): the call may be retried later. A write that failed this way
	// may still have taken effect.
	ErrUnavailable = errors.New("store: unavailable")
)

// Record is one key/value pair of a namespace.
type Record struct {
	Key   string
	Value []byte
}

// Entry is one element of an append-only log. Seq starts at 1 and grows by
// one per appended value; it is never reused, even after TrimLog trims the
// log empty. Only DeleteLog resets the numbering: a log appended to after
// DeleteLog starts again at 1, so callers that keep positions in a log must
// forget them when they delete it.
type Entry struct {
	Seq   uint64
	Value []byte
}

// Lease is a held lease. Token is the fencing token: it grows every time the
// lease is acquired (by anyone, including the same holder again) and is never
// reused for that lease name, even after release, so a write carrying an
// older token can be refused. Tokens of different lease names are unrelated.
//
// Expires is computed on the store's clock (the Redis server's clock, or the
// local clock for the embedded store). Holders should schedule renewals from
// their own monotonic timer (e.g. renew every ttl/3 after acquiring) rather
// than by comparing Expires with their wall clock.
type Lease struct {
	Name    string
	Holder  string
	Token   uint64
	Expires time.Time
}

// Store is the durable state shared by all gateway replicas.
//
// Namespaces (ns), log names, lease names and holders are short non-empty
// identifiers chosen by the caller (e.g. "streams", "cursors/orders"); an
// empty one is rejected with an error. Keys and values are arbitrary bytes
// (the empty key included). All methods are safe for concurrent use. Context
// cancellation is honoured before a call reaches the store; a write that has
// been sent may still take effect.
//
// A lease is held only while it is unexpired: once its expiry passes, fenced
// writes with its token fail and it can no longer be renewed, even if nobody
// has taken it over yet.
type Store interface {
	// Get returns the value of key in ns, or ErrNotFound.
	Get(ctx context.Context, ns, key string) ([]byte, error)
	// Put sets key in ns to val.
	Put(ctx context.Context, ns, key string, val []byte) error
	// PutIfAbsent sets key only if it does not exist yet and reports whether
	// it did. Used for values that must be agreed on by all replicas, such as
	// the cursor signing key.
	PutIfAbsent(ctx context.Context, ns, key string, val []byte) (bool, error)
	// Delete removes key from ns. Deleting a missing key is not an error.
	Delete(ctx context.Context, ns, key string) error
	// List returns every record of ns sorted by key.
	List(ctx context.Context, ns string) ([]Record, error)

	// PutFenced sets key in ns only while lease is held with token; otherwise
	// it returns ErrFenced and writes nothing. The check and the write are
	// atomic.
	PutFenced(ctx context.Context, ns, key string, val []byte, lease string, token uint64) error

	// CompareAndSwap sets key in ns to val only if its value is still old,
	// and reports whether it did; the comparison and the write are atomic.
	// A nil old means "absent": the swap happens only if key does not exist
	// (a non-nil empty old is the empty value, which is a value). It is how
	// a read-modify-write of a shared record (a subscriber's state, written
	// by acks on any replica and by bridges) avoids losing a concurrent
	// write: read, compute, swap, and read again when the swap fails.
	CompareAndSwap(ctx context.Context, ns, key string, old, val []byte) (bool, error)
	// CompareAndSwapFenced is CompareAndSwap while lease is held with
	// token; otherwise it returns ErrFenced (whether or not old matches)
	// and writes nothing. The check, the comparison and the write are
	// atomic.
	CompareAndSwapFenced(ctx context.Context, ns, key string, old, val []byte, lease string, token uint64) (bool, error)

	// Append adds values to the end of the named log atomically and returns
	// the sequence number of the last one. The values get consecutive
	// sequence numbers. With no values it writes nothing and returns the last
	// sequence number handed out (0 for a log that does not exist).
	Append(ctx context.Context, log string, vals ...[]byte) (uint64, error)
	// AppendFenced is Append while lease is held with token; otherwise it
	// returns ErrFenced and appends nothing. The check and the append are
	// atomic. vals must not be empty.
	AppendFenced(ctx context.Context, log, lease string, token uint64, vals ...[]byte) (uint64, error)
	// ReadLog returns up to limit entries with Seq > after, in order; limit
	// <= 0 means no limit. A log that does not exist reads as empty.
	ReadLog(ctx context.Context, log string, after uint64, limit int) ([]Entry, error)
	// TrimLog drops every entry with Seq <= upTo. Trimming a log that does
	// not exist, or past its end, is not an error; sequence numbers already
	// handed out are still never reused.
	TrimLog(ctx context.Context, log string, upTo uint64) error
	// DeleteLog removes the log and all its entries, and resets its sequence
	// numbering. Deleting a missing log is not an error.
	DeleteLog(ctx context.Context, log string) error
	// LogLen returns the number of entries currently in the log.
	LogLen(ctx context.Context, log string) (int, error)

	// AcquireLease takes the named lease for holder for ttl if it is free or
	// expired (or already held by holder, which then gets a new token). It
	// returns ErrLeaseHeld while another holder's lease is unexpired. ttl must
	// be at least a millisecond.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// RenewLease extends a held lease to expire ttl from now; ErrLeaseLost if
	// it is no longer held with that token or has expired. The token is kept.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease gives a held lease up early; ErrLeaseLost if it was lost.
	// A lease that expired without being taken over is still removed (nobody
	// else holds it), but the call reports ErrLeaseLost because the caller's
	// fenced writes were already being refused.
	ReleaseLease(ctx context.Context, l Lease) error
	// GetLease returns the current lease (possibly expired) or ErrNotFound if
	// it was never acquired or has been released.
	GetLease(ctx context.Context, name string) (Lease, error)

	// Ping reports whether the store is reachable (used by /readyz).
	Ping(ctx context.Context) error
	// Close releases resources. The Store must not be used afterwards: every
	// method then returns ErrClosed. Closing twice is harmless.
	Close() error
}
