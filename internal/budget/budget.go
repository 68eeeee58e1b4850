// Package budget bounds the bytes a producer may hold ahead of its
// consumer. A count of items alone does not bound memory: one bulk
// transaction of 100,000 rows weighs more than 512 small ones, and a client
// that reads slower than vtgate sends would otherwise pull a whole backlog
// into memory.
package budget

import (
	"context"
	"sync"
)

// Bytes is a byte budget shared by one producer goroutine, which acquires,
// and any number of consumers, which release. An item larger than the whole
// budget still passes when nothing else is held, so nothing is too big to
// deliver.
type Bytes struct {
	mu    sync.Mutex
	used  int
	max   int
	freed chan struct{} // one pending wake-up for the (single) producer
}

// New returns a budget of max bytes.
func New(max int) *Bytes {
	return &Bytes{max: max, freed: make(chan struct{}, 1)}
}

// TryAcquire takes n bytes if they fit now (or nothing is held).
func (b *Bytes) TryAcquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == 0 || b.used+n <= b.max {
		b.used += n
		return true
	}
	return false
}

// Acquire waits until n bytes fit; it fails only when ctx ends.
func (b *Bytes) Acquire(ctx context.Context, n int) error {
	for !b.TryAcquire(n) {
		select {
		case <-b.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Release returns n bytes.
func (b *Bytes) Release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// Used reports the bytes held.
func (b *Bytes) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
