package handlers

import (
	"context"
	"sync"
)

// wsQueue is a WebSocket's send queue: first in, first out, bounded in
// items, one producer and one consumer. It holds memory only for what it
// holds: a buffered channel of --ws-queue items would cost every connection
// its full size (4,096 items, ≈ 230 KiB) from the start, idle or not, and a
// dashboard keeps thousands of idle connections.
type wsQueue struct {
	max int
	// pushed is called when an item is added: it kicks the writer
	// (wswriter.go), which does not wait for the queue.
	pushed func()
	space  chan struct{} // signalled when an item is taken (capacity 1)

	mu    sync.Mutex
	items []wsMessage // a ring: n items from head
	head  int
	n     int
	// refused is set when a push found the queue full: the next pop
	// signals space (a signal per pop cost every message a channel send).
	refused bool
}

func newWSQueue(max int) *wsQueue {
	return &wsQueue{max: max, pushed: func() {}, space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tryPush adds m unless the queue is full.
func (q *wsQueue) tryPush(m wsMessage) bool {
	q.mu.Lock()
	if q.n >= q.max {
		q.refused = true
		q.mu.Unlock()
		return false
	}
	if q.n == len(q.items) {
		q.grow()
	}
	q.items[(q.head+q.n)%len(q.items)] = m
	q.n++
	q.mu.Unlock()
	q.pushed()
	return true
}

// push adds m, waiting for room until ctx ends.
func (q *wsQueue) push(ctx context.Context, m wsMessage) error {
	for !q.tryPush(m) {
		select {
		case <-q.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pop takes the oldest item, if any.
func (q *wsQueue) pop() (wsMessage, bool) { return q.popUpTo(-1) }

// popUpTo takes the oldest item if its weight is at most max (any weight
// when max < 0).
func (q *wsQueue) popUpTo(max int) (wsMessage, bool) {
	q.mu.Lock()
	if q.n == 0 || (max >= 0 && q.items[q.head].weight > max) {
		q.mu.Unlock()
		return wsMessage{}, false
	}
	m := q.items[q.head]
	q.items[q.head] = wsMessage{} // the transaction is not kept alive by the ring
	refused := q.refused
	q.refused = false
	q.head = (q.head + 1) % len(q.items)
	q.n--
	if q.n == 0 {
		q.head = 0
		if len(q.items) > wsQueueKeep {
			q.items = nil // a burst's ring goes with the burst
		}
	}
	q.mu.Unlock()
	if refused {
		signal(q.space)
	}
	return m, true
}

// len reports how many items are queued.
func (q *wsQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// wsQueueKeep is the ring size kept while the queue is empty: enough for
// the usual trickle of live transactions without reallocating.
const wsQueueKeep = 16

// grow doubles the ring (up to max), keeping the order. Called with mu held.
func (q *wsQueue) grow() {
	size := min(max(2*len(q.items), 4), q.max)
	items := make([]wsMessage, size)
	for i := 0; i < q.n; i++ {
		items[i] = q.items[(q.head+i)%len(q.items)]
	}
	q.items, q.head = items, 0
}
