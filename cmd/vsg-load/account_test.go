package main

import (
	"fmt"
	"testing"
)

// log1 is a writer log of n rows sent 10 ns apart, each returning 5 ns
// later, all committed.
func log1(n int) *writeLog {
	w := newWriteLog(n)
	for i := range n {
		w.sent[i] = int64(1000 + 10*i)
		w.done[i] = w.sent[i] + 5
		w.ok[i] = true
	}
	return w
}

func TestTallyDuplicates(t *testing.T) {
	tl := newTally()
	for _, s := range []int64{0, 1, 1, 700, 0, 2} {
		tl.add(s, 1)
	}
	if tl.rows != 6 || tl.dups != 2 || tl.unique() != 4 || tl.first != 0 {
		t.Fatalf("rows %d dups %d unique %d first %d", tl.rows, tl.dups, tl.unique(), tl.first)
	}
	if !tl.has(700) || tl.has(699) || tl.has(1<<20) {
		t.Fatal("has")
	}
}

func TestEarlyReaderMustSeeEveryRow(t *testing.T) {
	w := log1(100)
	tl := newTally()
	tl.readyAt = 500 // before the writer started
	for s := int64(0); s < 100; s++ {
		if s != 0 && s != 57 {
			tl.add(s, 0)
		}
	}
	r := tl.check(w, 100)
	if r.expected != 100 || r.lost != 2 || fmt.Sprint(r.sample) != "[0 57]" {
		t.Fatalf("%+v", r)
	}
}

func TestLateReaderCountsFromItsStart(t *testing.T) {
	w := log1(100)
	// Ready only while row 40 was being sent: rows up to 40 are not
	// expected; from 41 on, each is.
	tl := newTally()
	tl.readyAt = w.sent[40] + 1
	for s := int64(41); s < 100; s++ {
		tl.add(s, 0)
	}
	if r := tl.check(w, 100); r.expected != 59 || r.lost != 0 {
		t.Fatalf("%+v", r)
	}
	// Receiving row 38 moves the start back: 39 and 40 are due too.
	tl.add(38, 0)
	tl.first = 38
	if r := tl.check(w, 100); r.expected != 61 || r.lost != 2 {
		t.Fatalf("%+v", r)
	}
	// The same reader missing row 41 has lost it.
	tl2 := newTally()
	tl2.readyAt = w.sent[40] + 1
	for s := int64(42); s < 100; s++ {
		tl2.add(s, 0)
	}
	if r := tl2.check(w, 100); r.lost != 1 || r.sample[0] != 41 {
		t.Fatalf("%+v", r)
	}
}

func TestFirstRowBoundsTheStart(t *testing.T) {
	// A reader that learnt its position late (no heartbeat yet) but
	// received row 10: every row sent after row 10 returned must follow.
	w := log1(30)
	tl := newTally()
	tl.readyAt = w.sent[25]
	tl.add(10, 0)
	tl.add(12, 0)
	r := tl.check(w, 30)
	if r.expected != 19 || r.lost != 18 {
		t.Fatalf("%+v", r)
	}
}

func TestNeverReadyReaderHasNoBaseline(t *testing.T) {
	w := log1(10)
	tl := newTally()
	if _, ok := tl.baseline(w); ok {
		t.Fatal("baseline without position or rows")
	}
	if r := tl.check(w, 10); r.expected != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestFailedInsertsAreNotExpected(t *testing.T) {
	w := log1(10)
	w.ok[3], w.ok[4] = false, false
	tl := newTally()
	tl.readyAt = 1
	for s := int64(0); s < 10; s++ {
		if s != 3 {
			tl.add(s, 0)
		}
	}
	r := tl.check(w, 10)
	if r.expected != 8 || r.lost != 0 || r.foreign != 1 {
		t.Fatalf("%+v", r)
	}
}
