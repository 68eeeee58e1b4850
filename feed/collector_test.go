package feed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// chanFeed is a feed whose transactions (or errors) are sent to it.
type chanFeed struct {
	ch chan feedItem
	n  int // transactions made, for their cursors
}

type feedItem struct {
	d   *hub.Delivery
	err error
}

func newChanFeed() *chanFeed { return &chanFeed{ch: make(chan feedItem, 100)} }

func (f *chanFeed) Next(ctx context.Context) (*hub.Delivery, error) {
	select {
	case it := <-f.ch:
		return it.d, it.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *chanFeed) TryNext(context.Context) (*hub.Delivery, bool, error) {
	select {
	case it := <-f.ch:
		return it.d, it.err == nil, it.err
	default:
		return nil, false, nil
	}
}

// txn queues a transaction of n events of size bytes each (0 events: a
// position-only one) and returns its cursor, "c<k>" for the k-th.
func (f *chanFeed) txn(n, size int) string {
	f.n++
	c := "c" + strconv.Itoa(f.n)
	evs := make([]event.Event, n)
	for i := range evs {
		evs[i] = event.Event{Type: event.TypeChange, JSON: make([]byte, size)}
	}
	f.ch <- feedItem{d: &hub.Delivery{Txn: &source.Txn{Events: evs}, Cursor: c}}
	return c
}

func (f *chanFeed) heartbeat() {
	f.ch <- feedItem{d: &hub.Delivery{Txn: &source.Txn{Heartbeat: true}, Cursor: "hb"}}
}

func (f *chanFeed) fail(err error) { f.ch <- feedItem{err: err} }

// recBatch records what it was given: the events of each transaction, and
// its cursor.
type recBatch struct {
	sizes   []int
	cursors []string
}

func (b *recBatch) Add(d *hub.Delivery) {
	b.sizes = append(b.sizes, len(d.Events))
	b.cursors = append(b.cursors, d.Cursor)
}

func (b *recBatch) String() string { return fmt.Sprint(b.sizes) }

func collect(t *testing.T, c *Collector, lim Limits) (*recBatch, Collected) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := &recBatch{}
	res, err := c.Collect(ctx, b, lim)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	return b, res
}

func TestCollectCountLimit(t *testing.T) {
	f := newChanFeed()
	f.txn(2, 10)
	c2 := f.txn(1, 10)
	c3 := f.txn(2, 10) // would make 5 > 4: held for the next batch
	f.txn(0, 0)
	c := NewCollector(f)
	b, res := collect(t, c, Limits{Events: 4})
	if fmt.Sprint(b.sizes) != "[2 1]" || res.Events != 3 || res.Cursor != c2 || res.Drained {
		t.Fatalf("first batch %v %+v", b, res)
	}
	// The held transaction starts the next batch; the position-only one
	// after it is part of it and moves its cursor.
	b, res = collect(t, c, Limits{Events: 4})
	if fmt.Sprint(b.sizes) != "[2 0]" || res.Events != 2 || res.Cursor != "c4" || !res.Drained {
		t.Fatalf("second batch %v %+v (held %s)", b, res, c3)
	}
}

func TestCollectByteLimit(t *testing.T) {
	f := newChanFeed()
	f.txn(1, 100)
	f.txn(2, 100)
	f.txn(1, 150) // 300+150 > 400
	c := NewCollector(f)
	b, res := collect(t, c, Limits{Events: 100, Bytes: 400})
	if fmt.Sprint(b.sizes) != "[1 2]" || res.Bytes != 300 || res.Cursor != "c2" {
		t.Fatalf("first batch %v %+v", b, res)
	}
	b, res = collect(t, c, Limits{Bytes: 400})
	if fmt.Sprint(b.sizes) != "[1]" || res.Bytes != 150 || res.Cursor != "c3" {
		t.Fatalf("second batch %v %+v", b, res)
	}
	// Reaching the limit exactly ends the batch without reading on.
	f.txn(2, 200)
	f.txn(1, 1)
	if b, res = collect(t, c, Limits{Bytes: 400}); fmt.Sprint(b.sizes) != "[2]" || res.Drained {
		t.Fatalf("full batch %v %+v", b, res)
	}
}

// Transactions are never split: one larger than the limits is a batch of
// its own.
func TestCollectLargeTransactionAlone(t *testing.T) {
	f := newChanFeed()
	f.txn(1, 10)
	f.txn(7, 10)
	f.txn(1, 10)
	f.txn(1, 1000)
	c := NewCollector(f)
	for i, want := range []string{"[1]", "[7]", "[1]", "[1]"} {
		if b, _ := collect(t, c, Limits{Events: 3, Bytes: 100}); b.String() != want {
			t.Fatalf("batch %d: %v, want %s", i, b, want)
		}
	}
}

// NoHoldBack takes the transaction that crosses the limit and stops there.
func TestCollectNoHoldBack(t *testing.T) {
	f := newChanFeed()
	f.txn(2, 10)
	f.txn(2, 10)
	f.txn(2, 10)
	c := NewCollector(f, NoHoldBack())
	b, res := collect(t, c, Limits{Events: 3})
	if b.String() != "[2 2]" || res.Events != 4 || res.Cursor != "c2" || res.Drained {
		t.Fatalf("batch %v %+v", b, res)
	}
}

// Position-only transactions before the first events go to the batch (they
// move its cursor) without ending the wait; heartbeats are not passed.
func TestCollectWaitsForEvents(t *testing.T) {
	f := newChanFeed()
	f.txn(0, 0)
	f.heartbeat()
	go func() {
		time.Sleep(20 * time.Millisecond)
		f.txn(0, 0)
		f.heartbeat()
		f.txn(3, 10)
	}()
	b, res := collect(t, NewCollector(f), Limits{Events: 10})
	if b.String() != "[0 0 3]" || fmt.Sprint(b.cursors) != "[c1 c2 c3]" || res.Cursor != "c3" || !res.Drained || res.TimedOut {
		t.Fatalf("batch %v %v %+v", b, b.cursors, res)
	}
}

func TestCollectFirstWait(t *testing.T) {
	f := newChanFeed()
	f.txn(0, 0)
	c := NewCollector(f, FirstWait(50*time.Millisecond))
	start := time.Now()
	b, res := collect(t, c, Limits{Events: 10})
	if took := time.Since(start); took < 50*time.Millisecond || took > 2*time.Second {
		t.Fatalf("waited %v for 50ms", took)
	}
	if b.String() != "[0]" || res.Cursor != "c1" || !res.TimedOut || !res.Drained || res.Events != 0 {
		t.Fatalf("batch %v %+v", b, res)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrWaitOver) {
		t.Fatalf("Next after the wait: %v, want ErrWaitOver", err)
	}
}

func TestCollectWaitWhile(t *testing.T) {
	f := newChanFeed()
	var live atomic.Bool
	c := NewCollector(f, WaitWhile(func() bool { return !live.Load() }))
	f.txn(0, 0)
	go func() {
		time.Sleep(20 * time.Millisecond)
		live.Store(true)
		f.heartbeat()
	}()
	// The wait goes on over the position-only transaction and ends with
	// the heartbeat read once live.
	b, res := collect(t, c, Limits{})
	if b.String() != "[0]" || res.Cursor != "c1" || !res.Drained || res.TimedOut {
		t.Fatalf("batch %v %+v", b, res)
	}
	// Already live: no wait at all.
	if b, res = collect(t, c, Limits{}); b.String() != "[]" || !res.Drained || res.Cursor != "" {
		t.Fatalf("live batch %v %+v", b, res)
	}
}

func TestCollectLinger(t *testing.T) {
	f := newChanFeed()
	f.txn(1, 10)
	go func() {
		time.Sleep(10 * time.Millisecond)
		f.txn(1, 10)
	}()
	b, res := collect(t, NewCollector(f), Limits{Events: 10, Linger: 200 * time.Millisecond})
	if b.String() != "[1 1]" || !res.Drained {
		t.Fatalf("batch %v %+v", b, res)
	}
	// Without linger only what is ready is taken.
	f.txn(1, 10)
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.txn(1, 10)
	}()
	c := NewCollector(f)
	if b, _ := collect(t, c, Limits{Events: 10}); b.String() != "[1]" {
		t.Fatalf("batch without linger %v", b)
	}
	collect(t, c, Limits{})
}

func TestCollectCancel(t *testing.T) {
	f := newChanFeed()
	f.txn(0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	idle := 0
	c := NewCollector(f, IdleEvery(time.Millisecond))
	_, err := c.Collect(ctx, &recBatch{}, Limits{})
	for ; errors.Is(err, ErrIdle); _, err = c.Collect(ctx, &recBatch{}, Limits{}) {
		idle++
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("collect: %v, want context.Canceled", err)
	}
	if idle == 0 {
		t.Fatal("no idle call while waiting")
	}
	if _, err := c.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("next: %v, want context.Canceled", err)
	}
}

// A feed error before the batch has events is returned at once; after, the
// batch is returned and the error comes with the next call.
func TestCollectErrors(t *testing.T) {
	boom := errors.New("boom")
	f := newChanFeed()
	f.txn(0, 0)
	f.fail(boom)
	if _, err := NewCollector(f).Collect(context.Background(), &recBatch{}, Limits{}); !errors.Is(err, boom) {
		t.Fatalf("error while waiting: %v", err)
	}
	f.txn(1, 1)
	f.txn(0, 0)
	f.fail(boom)
	c := NewCollector(f)
	b, res := collect(t, c, Limits{})
	if b.String() != "[1 0]" || res.Cursor != "c3" || res.Drained {
		t.Fatalf("batch before the error %v %+v", b, res)
	}
	if _, err := c.Collect(context.Background(), &recBatch{}, Limits{}); !errors.Is(err, boom) {
		t.Fatalf("next batch: %v, want the held error", err)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("next: %v, want the held error", err)
	}
	// An idle reader is told so, and a held error is not lost to it.
	f = newChanFeed()
	c = NewCollector(f, IdleEvery(time.Millisecond))
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrIdle) {
		t.Fatalf("idle: %v, want ErrIdle", err)
	}
	f.fail(boom)
	if _, err := c.Next(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("after idle: %v, want the feed's error", err)
	}
}

// Next passes over position-only transactions and heartbeats, and reports
// ErrIdle every interval counted from the start of each wait:
// heartbeats and position-only transactions do not restart it.
func TestCollectorNext(t *testing.T) {
	f := newChanFeed()
	f.txn(0, 0)
	f.heartbeat()
	c3 := f.txn(2, 1)
	c := NewCollector(f)
	if d, err := c.Next(context.Background()); err != nil || d.Cursor != c3 {
		t.Fatalf("next: %v %v", d, err)
	}

	// Heartbeats do not make a reader busy: idle calls come while they do.
	f = newChanFeed()
	idle := make(chan time.Time, 100)
	c = NewCollector(f, IdleEvery(100*time.Millisecond))
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		// Heartbeats every 5ms for 300ms, then a transaction.
		for range 60 {
			time.Sleep(5 * time.Millisecond)
			f.heartbeat()
		}
		f.txn(1, 1)
	}()
	_, err := c.Next(context.Background())
	for ; errors.Is(err, ErrIdle); _, err = c.Next(context.Background()) {
		idle <- time.Now()
	}
	if err != nil {
		t.Fatal(err)
	}
	<-stop
	if len(idle) == 0 {
		t.Error("no idle call in 300ms of heartbeats with a 100ms interval")
	}
}

// TestBeforeWait: the hook runs when the collector is about to block, and
// only then: not while transactions are ready, also when the ready ones
// were passed over (position-only, a heartbeat). A push transport flushes
// there what it held back expecting more.
func TestBeforeWait(t *testing.T) {
	f := newChanFeed()
	f.txn(2, 10)
	f.txn(0, 0)
	f.heartbeat()
	waits := 0
	c := NewCollector(f, BeforeWait(func() error {
		waits++
		f.txn(1, 10) // what the wait would have waited for
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := c.Next(ctx)
	if err != nil || len(d.Events) != 2 || waits != 0 {
		t.Fatalf("first: %v, %v, %d waits; want the ready transaction and no wait", d, err, waits)
	}
	d, err = c.Next(ctx)
	if err != nil || len(d.Events) != 1 || d.Cursor != "c3" || waits != 1 {
		t.Fatalf("second: %+v, %v, %d waits; want c3 after one wait, the passed-over ones first", d, err, waits)
	}
	failing := NewCollector(newChanFeed(), BeforeWait(func() error { return errors.New("flush failed") }))
	if _, err := failing.Next(ctx); err == nil || err.Error() != "flush failed" {
		t.Fatalf("a failing hook: %v", err)
	}
}
