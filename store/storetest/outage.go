package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// Outage wraps a store that tests can take down: while down every call
// fails with store.ErrUnavailable, as a Redis that does not answer makes
// the real store's calls fail, without touching the wrapped store.
type Outage struct {
	store.Store
	down atomic.Bool
}

// NewOutage wraps st, up.
func NewOutage(st store.Store) *Outage { return &Outage{Store: st} }

// Down makes every call fail until Up.
func (o *Outage) Down() { o.down.Store(true) }

// Up ends the outage.
func (o *Outage) Up() { o.down.Store(false) }

func (o *Outage) fail(op string) error {
	if o.down.Load() {
		return fmt.Errorf("outage: %s: %w", op, store.ErrUnavailable)
	}
	return nil
}

// Get implements store.Store.
func (o *Outage) Get(ctx context.Context, ns, key string) ([]byte, error) {
	if err := o.fail("get"); err != nil {
		return nil, err
	}
	return o.Store.Get(ctx, ns, key)
}

// Put implements store.Store.
func (o *Outage) Put(ctx context.Context, ns, key string, val []byte) error {
	if err := o.fail("put"); err != nil {
		return err
	}
	return o.Store.Put(ctx, ns, key, val)
}

// PutIfAbsent implements store.Store.
func (o *Outage) PutIfAbsent(ctx context.Context, ns, key string, val []byte) (bool, error) {
	if err := o.fail("put-if-absent"); err != nil {
		return false, err
	}
	return o.Store.PutIfAbsent(ctx, ns, key, val)
}

// Delete implements store.Store.
func (o *Outage) Delete(ctx context.Context, ns, key string) error {
	if err := o.fail("delete"); err != nil {
		return err
	}
	return o.Store.Delete(ctx, ns, key)
}

// List implements store.Store.
func (o *Outage) List(ctx context.Context, ns string) ([]store.Record, error) {
	if err := o.fail("list"); err != nil {
		return nil, err
	}
	return o.Store.List(ctx, ns)
}

// PutFenced implements store.Store.
func (o *Outage) PutFenced(ctx context.Context, ns, key string, val []byte, lease string, token uint64) error {
	if err := o.fail("fenced put"); err != nil {
		return err
	}
	return o.Store.PutFenced(ctx, ns, key, val, lease, token)
}

// CompareAndSwap implements store.Store.
func (o *Outage) CompareAndSwap(ctx context.Context, ns, key string, old, val []byte) (bool, error) {
	if err := o.fail("compare-and-swap"); err != nil {
		return false, err
	}
	return o.Store.CompareAndSwap(ctx, ns, key, old, val)
}

// CompareAndSwapFenced implements store.Store.
func (o *Outage) CompareAndSwapFenced(ctx context.Context, ns, key string, old, val []byte, lease string, token uint64) (bool, error) {
	if err := o.fail("fenced compare-and-swap"); err != nil {
		return false, err
	}
	return o.Store.CompareAndSwapFenced(ctx, ns, key, old, val, lease, token)
}

// Append implements store.Store.
func (o *Outage) Append(ctx context.Context, log string, vals ...[]byte) (uint64, error) {
	if err := o.fail("append"); err != nil {
		return 0, err
	}
	return o.Store.Append(ctx, log, vals...)
}

// AppendFenced implements store.Store.
func (o *Outage) AppendFenced(ctx context.Context, log, lease string, token uint64, vals ...[]byte) (uint64, error) {
	if err := o.fail("fenced append"); err != nil {
		return 0, err
	}
	return o.Store.AppendFenced(ctx, log, lease, token, vals...)
}

// ReadLog implements store.Store.
func (o *Outage) ReadLog(ctx context.Context, log string, after uint64, limit int) ([]store.Entry, error) {
	if err := o.fail("read log"); err != nil {
		return nil, err
	}
	return o.Store.ReadLog(ctx, log, after, limit)
}

// TrimLog implements store.Store.
func (o *Outage) TrimLog(ctx context.Context, log string, upTo uint64) error {
	if err := o.fail("trim log"); err != nil {
		return err
	}
	return o.Store.TrimLog(ctx, log, upTo)
}

// DeleteLog implements store.Store.
func (o *Outage) DeleteLog(ctx context.Context, log string) error {
	if err := o.fail("delete log"); err != nil {
		return err
	}
	return o.Store.DeleteLog(ctx, log)
}

// LogLen implements store.Store.
func (o *Outage) LogLen(ctx context.Context, log string) (int, error) {
	if err := o.fail("log len"); err != nil {
		return 0, err
	}
	return o.Store.LogLen(ctx, log)
}

// AcquireLease implements store.Store.
func (o *Outage) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if err := o.fail("acquire"); err != nil {
		return store.Lease{}, err
	}
	return o.Store.AcquireLease(ctx, name, holder, ttl)
}

// RenewLease implements store.Store.
func (o *Outage) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if err := o.fail("renew"); err != nil {
		return store.Lease{}, err
	}
	return o.Store.RenewLease(ctx, l, ttl)
}

// ReleaseLease implements store.Store.
func (o *Outage) ReleaseLease(ctx context.Context, l store.Lease) error {
	if err := o.fail("release"); err != nil {
		return err
	}
	return o.Store.ReleaseLease(ctx, l)
}

// GetLease implements store.Store.
func (o *Outage) GetLease(ctx context.Context, name string) (store.Lease, error) {
	if err := o.fail("get lease"); err != nil {
		return store.Lease{}, err
	}
	return o.Store.GetLease(ctx, name)
}

// Ping implements store.Store.
func (o *Outage) Ping(ctx context.Context) error {
	if err := o.fail("ping"); err != nil {
		return err
	}
	return o.Store.Ping(ctx)
}
