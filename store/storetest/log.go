package storetest

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/store"
)

func appendN(t *testing.T, s store.Store, log string, vals ...string) uint64 {
	t.Helper()
	bs := make([][]byte, len(vals))
	for i, v := range vals {
		bs[i] = []byte(v)
	}
	last, err := s.Append(ctxT(t), log, bs...)
	must(t, err, "Append")
	return last
}

// wantLog checks ReadLog(after, limit) returns exactly the seqs in want,
// with the values "v<seq>".
func wantLog(t *testing.T, s store.Store, log string, after uint64, limit int, want ...uint64) {
	t.Helper()
	es, err := s.ReadLog(ctxT(t), log, after, limit)
	must(t, err, fmt.Sprintf("ReadLog(%q, %d, %d)", log, after, limit))
	var got []uint64
	for _, e := range es {
		got = append(got, e.Seq)
		if string(e.Value) != fmt.Sprintf("v%d", e.Seq) {
			t.Fatalf("ReadLog(%q, %d, %d): seq %d has value %q", log, after, limit, e.Seq, e.Value)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ReadLog(%q, %d, %d) seqs = %v, want %v", log, after, limit, got, want)
	}
}

func wantLen(t *testing.T, s store.Store, log string, want int) {
	t.Helper()
	n, err := s.LogLen(ctxT(t), log)
	must(t, err, "LogLen")
	if n != want {
		t.Fatalf("LogLen(%q) = %d, want %d", log, n, want)
	}
}

// appendV appends values "v<seq>" for the next n seqs, checking numbering.
func appendV(t *testing.T, s store.Store, log string, from uint64, n int) {
	t.Helper()
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("v%d", from+uint64(i))
	}
	if last := appendN(t, s, log, vals...); last != from+uint64(n)-1 {
		t.Fatalf("Append(%d values) = %d, want %d", n, last, from+uint64(n)-1)
	}
}

var logTests = []test{
	{"Missing", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		wantLog(t, s, "nolog", 0, 0)
		wantLog(t, s, "nolog", 5, 10)
		wantLen(t, s, "nolog", 0)
		must(t, s.TrimLog(ctx, "nolog", 10), "TrimLog missing log")
		must(t, s.DeleteLog(ctx, "nolog"), "DeleteLog missing log")
		last, err := s.Append(ctx, "nolog")
		must(t, err, "Append with no values")
		if last != 0 {
			t.Fatalf("Append() on missing log = %d, want 0", last)
		}
		// None of that may have created it.
		wantLen(t, s, "nolog", 0)
		appendV(t, s, "nolog", 1, 1)
	}},
	{"AppendRead", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		appendV(t, s, "l", 1, 1)
		appendV(t, s, "l", 2, 3)
		last, err := s.Append(ctx, "l")
		must(t, err, "Append with no values")
		if last != 4 {
			t.Fatalf("Append() = %d, want the last seq 4", last)
		}
		wantLen(t, s, "l", 4)
		wantLog(t, s, "l", 0, 0, 1, 2, 3, 4)
		wantLog(t, s, "l", 0, -1, 1, 2, 3, 4)
		wantLog(t, s, "l", 0, 2, 1, 2)
		wantLog(t, s, "l", 2, 1, 3)
		wantLog(t, s, "l", 2, 100, 3, 4)
		wantLog(t, s, "l", 4, 0)
		wantLog(t, s, "l", 1000, 0)
		wantLog(t, s, "l", math.MaxUint64, 0)
		wantLog(t, s, "l", math.MaxUint64-1, 0)
	}},
	{"BinaryValues", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		vals := [][]byte{allBytes(), {}, nil, []byte("\x00"), []byte("v=1 0-1 *")}
		last, err := s.Append(ctx, "l", vals...)
		must(t, err, "Append")
		if last != uint64(len(vals)) {
			t.Fatalf("Append = %d, want %d", last, len(vals))
		}
		es, err := s.ReadLog(ctx, "l", 0, 0)
		must(t, err, "ReadLog")
		if len(es) != len(vals) {
			t.Fatalf("ReadLog = %d entries, want %d", len(es), len(vals))
		}
		for i, e := range es {
			if e.Seq != uint64(i+1) || !bytes.Equal(e.Value, vals[i]) {
				t.Fatalf("entry %d = {%d %q}, want {%d %q}", i, e.Seq, e.Value, i+1, vals[i])
			}
		}
	}},
	{"Trim", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		appendV(t, s, "l", 1, 10)
		must(t, s.TrimLog(ctx, "l", 0), "TrimLog 0")
		wantLen(t, s, "l", 10)
		must(t, s.TrimLog(ctx, "l", 4), "TrimLog 4")
		wantLen(t, s, "l", 6)
		wantLog(t, s, "l", 0, 0, 5, 6, 7, 8, 9, 10)
		wantLog(t, s, "l", 2, 2, 5, 6)
		wantLog(t, s, "l", 5, 1, 6)
		must(t, s.TrimLog(ctx, "l", 4), "TrimLog 4 again")
		must(t, s.TrimLog(ctx, "l", 2), "TrimLog below the first entry")
		wantLen(t, s, "l", 6)
		must(t, s.TrimLog(ctx, "l", 10), "TrimLog everything")
		wantLen(t, s, "l", 0)
		wantLog(t, s, "l", 0, 0)
		// Numbers handed out are never handed out again.
		appendV(t, s, "l", 11, 1)
		wantLog(t, s, "l", 0, 0, 11)
		must(t, s.TrimLog(ctx, "l", 1000), "TrimLog past the end")
		wantLen(t, s, "l", 0)
		appendV(t, s, "l", 12, 2)
		wantLog(t, s, "l", 0, 0, 12, 13)
		must(t, s.TrimLog(ctx, "l", math.MaxUint64), "TrimLog MaxUint64")
		wantLen(t, s, "l", 0)
		appendV(t, s, "l", 14, 1)
	}},
	{"Delete", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		appendV(t, s, "l", 1, 5)
		must(t, s.TrimLog(ctx, "l", 2), "TrimLog")
		must(t, s.DeleteLog(ctx, "l"), "DeleteLog")
		wantLen(t, s, "l", 0)
		wantLog(t, s, "l", 0, 0)
		// DeleteLog restarts numbering (documented on store.Entry).
		appendV(t, s, "l", 1, 2)
		wantLog(t, s, "l", 0, 0, 1, 2)
	}},
	{"Isolated", func(t *testing.T, s store.Store) {
		ctx := ctxT(t)
		appendV(t, s, "a", 1, 3)
		appendV(t, s, "a:b", 1, 1)
		appendV(t, s, "b", 1, 2)
		must(t, s.Put(ctx, "a", "k", []byte("x")), "Put in namespace named like a log")
		must(t, s.TrimLog(ctx, "a", 2), "TrimLog")
		must(t, s.DeleteLog(ctx, "b"), "DeleteLog")
		wantLog(t, s, "a", 0, 0, 3)
		wantLog(t, s, "a:b", 0, 0, 1)
		wantLog(t, s, "b", 0, 0)
		if getString(t, s, "a", "k") != "x" {
			t.Fatal("log operations touched a namespace")
		}
	}},
	{"ConcurrentAppend", func(t *testing.T, s store.Store) {
		const writers, batches = 8, 20
		type batch struct {
			last uint64
			vals []string
		}
		var mu sync.Mutex
		var got []batch
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				ctx := ctxT(t)
				for b := range batches {
					n := 1 + (w+b)%3
					vals := make([][]byte, n)
					strs := make([]string, n)
					for i := range vals {
						strs[i] = fmt.Sprintf("w%d-b%d-%d", w, b, i)
						vals[i] = []byte(strs[i])
					}
					last, err := s.Append(ctx, "l", vals...)
					if err != nil {
						t.Errorf("Append: %v", err)
						return
					}
					mu.Lock()
					got = append(got, batch{last, strs})
					mu.Unlock()
					if _, err := s.ReadLog(ctx, "l", last-1, 10); err != nil {
						t.Errorf("ReadLog: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		es, err := s.ReadLog(ctxT(t), "l", 0, 0)
		must(t, err, "ReadLog")
		total := 0
		for _, b := range got {
			total += len(b.vals)
		}
		if len(es) != total {
			t.Fatalf("log has %d entries, want %d", len(es), total)
		}
		for i, e := range es {
			if e.Seq != uint64(i+1) {
				t.Fatalf("entry %d has seq %d: numbering not contiguous", i, e.Seq)
			}
		}
		// Each batch must occupy consecutive seqs ending at what Append
		// returned: appends are atomic.
		for _, b := range got {
			first := b.last - uint64(len(b.vals)) + 1
			for i, v := range b.vals {
				if e := es[first-1+uint64(i)]; string(e.Value) != v {
					t.Fatalf("seq %d = %q, want %q (batch ending at %d interleaved)", e.Seq, e.Value, v, b.last)
				}
			}
		}
	}},
}
