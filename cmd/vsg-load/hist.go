package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a log-linear latency histogram in the manner of HdrHistogram:
// values (microseconds) below 2^subBits are counted exactly; above, every
// power of two is split into 2^subBits buckets, so a reported quantile is
// within 1/2^subBits (0.8 %) of the true value. It is safe for concurrent
// use without locks (all readers of a run record into one histogram, up to
// hundreds of thousands of values per second), and its size is fixed:
// 64 powers × 128 buckets × 8 bytes = 64 KiB, whatever the count.
type hist struct {
	counts [64 << subBits]atomic.Uint64
	total  atomic.Uint64
	max    atomic.Int64
}

const subBits = 7

// bucketOf maps v ≥ 0 to its bucket index.
func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	return (shift+1)<<subBits + int(v>>shift) - 1<<subBits
}

// bucketValue is a representative value of bucket i: the middle of the
// range of values mapped to it.
func bucketValue(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	shift := i>>subBits - 1
	lo := uint64(i&(1<<subBits-1)+1<<subBits) << shift
	return lo + (uint64(1)<<shift)/2
}

// record adds one latency. Negative values (a clock step) count as zero.
func (h *hist) record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[bucketOf(uint64(us))].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// count is the number of values recorded.
func (h *hist) count() uint64 { return h.total.Load() }

// quantile returns the value at quantile q (0 < q ≤ 1), 0 when empty. The
// maximum is exact; other quantiles are bucket midpoints, never above it.
func (h *hist) quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank >= n {
		return h.maxValue()
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			v := time.Duration(bucketValue(i)) * time.Microsecond
			return min(v, h.maxValue())
		}
	}
	return h.maxValue()
}

// maxValue is the largest value recorded.
func (h *hist) maxValue() time.Duration { return time.Duration(h.max.Load()) * time.Microsecond }

// summary is what a report shows of h: p50, p99 and the maximum, in
// milliseconds.
func (h *hist) summary() (p50, p99, max float64) {
	return float64(h.quantile(0.50)) / 1e6, float64(h.quantile(0.99)) / 1e6, float64(h.maxValue()) / 1e6
}
