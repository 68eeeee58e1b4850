package main

import "math/bits"

// tally is one reader's record of the rows it received: a bitset of
// sequence numbers (1.5 KiB per reader for a minute at 200 rows/s), the
// duplicates, and the time from which it must see every row. It belongs to
// its reader's goroutine until the run ends.
type tally struct {
	seen  []uint64
	rows  int64 // rows received, duplicates included
	dups  int64
	first int64 // first sequence number received; -1 before any
	// firstAt is when first was received (Unix ns).
	firstAt int64
	// readyAt is when the reader first knew its position (Unix ns; 0 if it
	// never did): a cursor or heartbeat from the gateway, a subscribe reply
	// from Centrifugo. Every row whose INSERT was sent after it must arrive.
	readyAt int64
}

func newTally() *tally { return &tally{first: -1} }

// add records row seq and reports whether it had been received before.
func (t *tally) add(seq, now int64) (dup bool) {
	t.rows++
	w, b := seq>>6, uint64(1)<<(seq&63)
	if int(w) >= len(t.seen) {
		t.seen = append(t.seen, make([]uint64, int(w)+1-len(t.seen)+len(t.seen)/2)...)
	}
	if t.seen[w]&b != 0 {
		t.dups++
		return true
	}
	t.seen[w] |= b
	if t.first < 0 {
		t.first, t.firstAt = seq, now
	}
	return false
}

func (t *tally) has(seq int64) bool {
	w := seq >> 6
	return int(w) < len(t.seen) && t.seen[w]&(1<<(seq&63)) != 0
}

// unique is the number of distinct rows received.
func (t *tally) unique() int64 {
	n := 0
	for _, w := range t.seen {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}

// writeLog is what the writer did with each sequence number.
type writeLog struct {
	sent []int64 // Unix ns just before the INSERT was sent (the row's timestamp)
	done []int64 // Unix ns when it returned
	ok   []bool  // committed; a failed INSERT may or may not have committed
}

func newWriteLog(n int) *writeLog {
	return &writeLog{sent: make([]int64, n), done: make([]int64, n), ok: make([]bool, n)}
}

// baseline is the time after which every committed row must reach the
// reader. It is the earlier of two lower bounds of the reader's starting
// position: when the reader knew its position, and when the INSERT of its
// first row returned (that row's commit is after the position, and so is
// the commit of every INSERT sent after it returned). A reader ready before
// the writer started gets a baseline before every row: it must see them all.
// A reader that never became ready and received nothing has no baseline
// (ok=false): it is counted as failed, not as lossless.
func (t *tally) baseline(w *writeLog) (int64, bool) {
	b, ok := t.readyAt, t.readyAt != 0
	if t.first >= 0 && int(t.first) < len(w.done) && w.ok[t.first] {
		if d := w.done[t.first]; !ok || d < b {
			b, ok = d, true
		}
	}
	return b, ok
}

// lossReport is the result of checking one reader against the writer.
type lossReport struct {
	expected int64   // committed rows the reader had to receive
	lost     int64   // of those, not received
	sample   []int64 // a few lost sequence numbers, for the log
	foreign  int64   // rows received that the writer never committed (failed INSERTs that did commit)
}

// check compares what the reader received with what the writer committed.
// Rows the writer sent at or before the baseline are not expected (the
// reader may legitimately start after them) but count as received when
// they arrive.
func (t *tally) check(w *writeLog, n int64) lossReport {
	var r lossReport
	base, ok := t.baseline(w)
	for seq := int64(0); seq < n; seq++ {
		got := t.has(seq)
		if !w.ok[seq] {
			if got {
				r.foreign++
			}
			continue
		}
		if !ok || w.sent[seq] <= base {
			continue
		}
		r.expected++
		if !got {
			r.lost++
			if len(r.sample) < 5 {
				r.sample = append(r.sample, seq)
			}
		}
	}
	return r
}
