package budget

import (
	"context"
	"testing"
	"time"
)

func TestAcquireWaitsForRelease(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if b.Acquire(ctx, 60) != nil || b.Acquire(ctx, 40) != nil {
		t.Fatal("acquire within the budget failed")
	}
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire beyond the budget succeeded")
	}
	got := make(chan error)
	go func() { got <- b.Acquire(ctx, 30) }()
	b.Release(20) // 80 held: 30 may still not fit
	b.Release(40) // 40 held: now it does
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.Used() != 70 {
		t.Fatalf("used %d, want 70", b.Used())
	}
}

func TestOversizeGoesAlone(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	if !b.TryAcquire(500) {
		t.Fatal("an item larger than the budget must pass when nothing is held")
	}
	if b.TryAcquire(1) {
		t.Fatal("acquire succeeded while an oversize item is held")
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(cctx, 1); err == nil {
		t.Fatal("Acquire returned without room and before its context ended")
	}
	b.Release(500)
	if !b.TryAcquire(1) {
		t.Fatal("acquire failed on an empty budget")
	}
}
