package handlers

import (
	"context"
	"testing"
	"time"
)

// The queue keeps order across growth and wrap-around, refuses past its
// bound, lets a waiting producer in as soon as an item is taken, and lets
// go of a burst's memory once drained.
func TestWSQueue(t *testing.T) {
	q := newWSQueue(100)
	pushed := 0
	q.pushed = func() { pushed++ }
	if len(q.items) != 0 {
		t.Fatalf("a new queue holds a ring of %d", len(q.items))
	}
	next, want := 0, 0
	push := func(n int) {
		for range n {
			if !q.tryPush(wsMessage{weight: next}) {
				t.Fatalf("push %d refused with %d queued", next, q.len())
			}
			next++
		}
	}
	pop := func(n int) {
		for range n {
			m, ok := q.pop()
			if !ok || m.weight != want {
				t.Fatalf("pop = %d, %v; want %d", m.weight, ok, want)
			}
			want++
		}
	}
	// Interleaved so that the ring wraps while it grows.
	push(3)
	pop(2)
	push(10)
	pop(5)
	push(90)
	if q.len() != 96 {
		t.Fatalf("len %d, want 96", q.len())
	}
	push(4)
	if q.tryPush(wsMessage{}) {
		t.Fatal("a full queue took another item")
	}

	// A producer waits for room, and gets in once an item is taken.
	done := make(chan error, 1)
	go func() { done <- q.push(context.Background(), wsMessage{weight: next}) }()
	select {
	case err := <-done:
		t.Fatalf("push into a full queue returned at once: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	pop(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	next++
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.push(ctx, wsMessage{}); err == nil {
		t.Fatal("push into a full queue with an ended context succeeded")
	}

	pop(100)
	if _, ok := q.pop(); ok {
		t.Fatal("pop from an empty queue")
	}
	if len(q.items) != 0 {
		t.Fatalf("an empty queue keeps a ring of %d after a burst", len(q.items))
	}
	if pushed == 0 {
		t.Fatal("pushes did not call pushed")
	}
}
