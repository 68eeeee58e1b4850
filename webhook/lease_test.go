package webhook

import (
	"context"
	"errors"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
)

// partStore is one replica's view of a shared store that can be cut off
// (a network partition, or a process frozen mid-batch): while down, every
// call fails.
type partStore struct {
	store.Store
	down         atomic.Bool
	renewRefused atomic.Int32 // renewals that failed while down
	renewed      atomic.Int32 // renewals that succeeded
}

var errPartitioned = errors.New("partitioned")

func (p *partStore) err() error {
	if p.down.Load() {
		return errPartitioned
	}
	return nil
}

func (p *partStore) Get(ctx context.Context, ns, key string) ([]byte, error) {
	if err := p.err(); err != nil {
		return nil, err
	}
	return p.Store.Get(ctx, ns, key)
}
func (p *partStore) Put(ctx context.Context, ns, key string, val []byte) error {
	if err := p.err(); err != nil {
		return err
	}
	return p.Store.Put(ctx, ns, key, val)
}
func (p *partStore) PutIfAbsent(ctx context.Context, ns, key string, val []byte) (bool, error) {
	if err := p.err(); err != nil {
		return false, err
	}
	return p.Store.PutIfAbsent(ctx, ns, key, val)
}
func (p *partStore) Delete(ctx context.Context, ns, key string) error {
	if err := p.err(); err != nil {
		return err
	}
	return p.Store.Delete(ctx, ns, key)
}
func (p *partStore) List(ctx context.Context, ns string) ([]store.Record, error) {
	if err := p.err(); err != nil {
		return nil, err
	}
	return p.Store.List(ctx, ns)
}
func (p *partStore) PutFenced(ctx context.Context, ns, key string, val []byte, lease string, token uint64) error {
	if err := p.err(); err != nil {
		return err
	}
	return p.Store.PutFenced(ctx, ns, key, val, lease, token)
}
func (p *partStore) Append(ctx context.Context, log string, vals ...[]byte) (uint64, error) {
	if err := p.err(); err != nil {
		return 0, err
	}
	return p.Store.Append(ctx, log, vals...)
}
func (p *partStore) AppendFenced(ctx context.Context, log, lease string, token uint64, vals ...[]byte) (uint64, error) {
	if err := p.err(); err != nil {
		return 0, err
	}
	return p.Store.AppendFenced(ctx, log, lease, token, vals...)
}
func (p *partStore) ReadLog(ctx context.Context, log string, after uint64, limit int) ([]store.Entry, error) {
	if err := p.err(); err != nil {
		return nil, err
	}
	return p.Store.ReadLog(ctx, log, after, limit)
}
func (p *partStore) LogLen(ctx context.Context, log string) (int, error) {
	if err := p.err(); err != nil {
		return 0, err
	}
	return p.Store.LogLen(ctx, log)
}
func (p *partStore) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error) {
	if err := p.err(); err != nil {
		return store.Lease{}, err
	}
	return p.Store.AcquireLease(ctx, name, holder, ttl)
}
func (p *partStore) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if err := p.err(); err != nil {
		p.renewRefused.Add(1)
		return store.Lease{}, err
	}
	l, err := p.Store.RenewLease(ctx, l, ttl)
	if err == nil {
		p.renewed.Add(1)
	}
	return l, err
}
func (p *partStore) ReleaseLease(ctx context.Context, l store.Lease) error {
	if err := p.err(); err != nil {
		return err
	}
	return p.Store.ReleaseLease(ctx, l)
}
func (p *partStore) GetLease(ctx context.Context, name string) (store.Lease, error) {
	if err := p.err(); err != nil {
		return store.Lease{}, err
	}
	return p.Store.GetLease(ctx, name)
}

// replicas returns two services on one store and one binlog, each behind
// its own partStore.
func replicas(t *testing.T) (a, b *env, pa, pb *partStore) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vsg.db"), boltstore.WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l := newFakeLog()
	pa, pb = &partStore{Store: st}, &partStore{Store: st}
	return newEnvOn(t, pa, l), newEnvOn(t, pb, l), pa, pb
}

// Two replicas on one store: exactly one delivers, one request at a time,
// every row once and in order.
func TestOneReplicaDelivers(t *testing.T) {
	a, b, _, _ := replicas(t)
	r := newReceiver(t, nil)
	v := a.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 3 })
	ttl := WithLeaseTTL(2 * time.Second)
	sa := a.supervise(ttl, WithHolder("a"))
	sb := b.supervise(ttl, WithHolder("b"))
	for range 10 {
		a.log.addN(10, 2)
		time.Sleep(5 * time.Millisecond)
	}
	last := a.log.len()
	wait.For(t, "delivery", 10*time.Second, func() bool { return a.cursorN(v.ID) == last })
	if n := len(sa.Delivering()) + len(sb.Delivering()); n != 1 {
		t.Fatalf("%d replicas deliver", n)
	}
	checkRows(t, r.accepted(), a.log, 2, last)
	if r.maxConc != 1 {
		t.Fatalf("%d concurrent requests", r.maxConc)
	}
}

// The replica delivering a batch is cut off mid-request. The other takes
// over once the lease expires, re-sends the in-flight batch under the same
// webhook-id, and nothing is lost; the cut-off one stops without writing.
func TestTakeoverAfterPartition(t *testing.T) {
	a, b, pa, pb := replicas(t)
	first := make(chan struct{})
	release := make(chan struct{})
	r := newReceiver(t, func(n int, m *message, w http.ResponseWriter) bool {
		if n == 0 {
			close(first)
			<-release // the holder is frozen mid-batch
		}
		return false
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	v := a.create(r.url(), func(c *CreateRequest) { c.BatchMaxEvents = 4 })
	a.log.addN(6, 1)
	const ttl = 300 * time.Millisecond
	sa := a.supervise(WithLeaseTTL(ttl), WithHolder("a"))
	sb := b.supervise(WithLeaseTTL(ttl), WithHolder("b"))
	<-first
	owner, other, cut, live := sa, sb, pa, b
	if len(sa.Delivering()) == 0 {
		owner, other, cut, live = sb, sa, pb, a
	}
	cut.down.Store(true)
	cutAt := time.Now()
	wait.For(t, "the other replica to take over", 5*time.Second, func() bool { return len(other.Delivering()) == 1 })
	if took := time.Since(cutAt); took > 3*ttl {
		t.Errorf("takeover took %v with a %v lease", took, ttl)
	}
	wait.For(t, "the in-flight batch to be re-sent", 5*time.Second, func() bool { return len(r.messages()) >= 2 })
	msgs := r.messages()
	if msgs[1].ID != msgs[0].ID || string(msgs[1].Body) != string(msgs[0].Body) {
		t.Fatalf("re-sent batch %s differs from the in-flight %s", msgs[1].ID, msgs[0].ID)
	}
	last := a.log.len()
	wait.For(t, "delivery", 5*time.Second, func() bool { return live.cursorN(v.ID) == last })
	// The frozen replica wakes up: its request completes, but nothing it
	// writes lands, and it stops.
	cut.down.Store(false)
	close(release)
	wait.For(t, "the cut-off replica to stop", 5*time.Second, func() bool { return len(owner.Delivering()) == 0 })
	a.log.addN(3, 1)
	last = a.log.len()
	wait.For(t, "later delivery", 5*time.Second, func() bool { return live.cursorN(v.ID) == last })
	checkRows(t, r.accepted(), a.log, 2, last)
}

// A partition shorter than the lease does not move the webhook: the
// delivering replica keeps its lease (same token) and goes on delivering,
// and the other never starts.
func TestShortPartitionKeepsDeliverer(t *testing.T) {
	a, b, pa, pb := replicas(t)
	r := newReceiver(t, nil)
	v := a.create(r.url(), nil)
	const ttl = 1500 * time.Millisecond
	sa := a.supervise(WithLeaseTTL(ttl), WithHolder("a"))
	sb := b.supervise(WithLeaseTTL(ttl), WithHolder("b"))
	a.log.addN(2, 1)
	wait.For(t, "delivery", 5*time.Second, func() bool { return a.cursorN(v.ID) == 3 })
	owner, other, cut := sa, sb, pa
	if len(sa.Delivering()) == 0 {
		owner, other, cut = sb, sa, pb
	}
	ctx := context.Background()
	held, err := a.st.GetLease(ctx, leaseName(v.ID))
	if err != nil {
		t.Fatal(err)
	}

	cut.down.Store(true)
	wait.For(t, "a refused renewal", 5*time.Second, func() bool { return cut.renewRefused.Load() >= 1 })
	cut.down.Store(false)

	a.log.addN(2, 1)
	wait.For(t, "delivery after the partition", 5*time.Second, func() bool { return a.cursorN(v.ID) == 5 })
	// Four renewals after the partition end more than a lease time after
	// the last one before it: had the lease lapsed in between, the other
	// replica (asking at every scan) would hold it now.
	renewed := cut.renewed.Load()
	wait.For(t, "renewals after the partition", 5*time.Second, func() bool { return cut.renewed.Load() >= renewed+4 })
	now, err := a.st.GetLease(ctx, leaseName(v.ID))
	if err != nil || now.Token != held.Token || now.Holder != held.Holder {
		t.Fatalf("lease after the partition: %+v, %v; want %+v", now, err, held)
	}
	if len(owner.Delivering()) != 1 || len(other.Delivering()) != 0 {
		t.Fatalf("owner delivers %v, other %v", owner.Delivering(), other.Delivering())
	}
	checkRows(t, r.accepted(), a.log, 2, 5)
}

// A replica shutting down releases its leases: another takes over at once,
// not after the lease time.
func TestGracefulHandover(t *testing.T) {
	a, b, _, _ := replicas(t)
	r := newReceiver(t, nil)
	v := a.create(r.url(), nil)
	const ttl = 10 * time.Second // a handover that waited for expiry would time out
	sa := a.svc.NewSupervisor(WithLeaseTTL(ttl), WithHolder("a"), WithScanInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sa.Run(ctx); close(done) }()
	wait.For(t, "a to deliver", 5*time.Second, func() bool { return len(sa.Delivering()) == 1 })
	sb := b.supervise(WithLeaseTTL(ttl), WithHolder("b"), WithScanInterval(10*time.Millisecond))
	cancel()
	<-done
	wait.For(t, "b to take over", 2*time.Second, func() bool { return len(sb.Delivering()) == 1 })
	a.log.addN(2, 1)
	wait.For(t, "delivery", 5*time.Second, func() bool { return a.cursorN(v.ID) == 3 })
}
