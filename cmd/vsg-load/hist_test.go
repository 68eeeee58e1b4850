package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

func TestBucketsCoverEveryValueOnce(t *testing.T) {
	// Indexes grow with the value, without gaps, and a bucket's
	// representative maps back to it.
	prev := -1
	for v := uint64(0); v < 1<<16; v++ {
		b := bucketOf(v)
		if b != prev && b != prev+1 {
			t.Fatalf("value %d: bucket %d after %d", v, b, prev)
		}
		prev = b
		if got := bucketOf(bucketValue(b)); got != b {
			t.Fatalf("bucket %d: representative %d maps to %d", b, bucketValue(b), got)
		}
	}
	if b := bucketOf(math.MaxUint64); b >= len(hist{}.counts) {
		t.Fatalf("largest value in bucket %d of %d", b, len(hist{}.counts))
	}
}

func TestQuantilesWithinPrecision(t *testing.T) {
	var h hist
	r := rand.New(rand.NewPCG(1, 2))
	var vals []int64
	for range 100000 {
		// Log-uniform from 10 µs to 10 s, as latencies under load spread.
		us := int64(math.Exp(r.Float64()*math.Log(1e6)) * 10)
		vals = append(vals, us)
		h.record(time.Duration(us) * time.Microsecond)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := float64(vals[int(q*float64(len(vals)))-1])
		got := float64(h.quantile(q).Microseconds())
		if math.Abs(got-want)/want > 0.01 {
			t.Errorf("p%v = %v µs, want %v µs ±1%%", q*100, got, want)
		}
	}
	if got := h.quantile(1).Microseconds(); got != vals[len(vals)-1] {
		t.Errorf("max %d, want %d", got, vals[len(vals)-1])
	}
	if h.count() != uint64(len(vals)) {
		t.Errorf("count %d", h.count())
	}
}

func TestHistSmallAndEdgeCases(t *testing.T) {
	var h hist
	if h.quantile(0.5) != 0 || h.maxValue() != 0 {
		t.Fatal("empty histogram not zero")
	}
	for _, ms := range []int{1, 2, 3, 4, 100} {
		h.record(time.Duration(ms) * time.Millisecond)
	}
	h.record(-time.Second) // a clock step: counted as 0
	if got := h.quantile(0.5); got < 1900*time.Microsecond || got > 2100*time.Microsecond {
		t.Errorf("p50 = %v, want ≈2ms", got)
	}
	if got := h.maxValue(); got != 100*time.Millisecond {
		t.Errorf("max = %v", got)
	}
	if got := h.quantile(0.01); got != 0 {
		t.Errorf("p1 = %v, want 0", got)
	}
}

func TestHistConcurrent(t *testing.T) {
	var h hist
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10000 {
				h.record(time.Duration(g*10000+i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if h.count() != 80000 || h.maxValue() != 79999*time.Microsecond {
		t.Fatalf("count %d max %v", h.count(), h.maxValue())
	}
	if p := h.quantile(0.5); p < 39600*time.Microsecond || p > 40400*time.Microsecond {
		t.Fatalf("p50 %v", p)
	}
}
