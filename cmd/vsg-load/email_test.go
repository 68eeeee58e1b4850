package main

import (
	"fmt"
	"testing"
)

func TestEmailRoundTrip(t *testing.T) {
	e := emailFor("r7", 42, 1700000000123456789)
	if e != "load-r7-42-1700000000123456789@x" {
		t.Fatalf("email = %q", e)
	}
	msg := []byte(`{"type":"change","op":"insert","after":{"customer_id":9,"email":"` + e + `"},"cursor":"1abc","txn_end":true}`)
	var got [][2]int64
	bad := scanRows(msg, rowMarker("r7"), func(seq, ts int64) { got = append(got, [2]int64{seq, ts}) })
	if bad != 0 || len(got) != 1 || got[0] != [2]int64{42, 1700000000123456789} {
		t.Fatalf("got %v bad %d", got, bad)
	}
}

func TestScanRowsSeveralAndOtherRuns(t *testing.T) {
	// A transaction array (batch=txn) or a Centrifugo frame holds several
	// rows; rows of another run, or of a run whose id ends like ours, are
	// not ours.
	msg := []byte(fmt.Sprintf(`[{"email":"%s"},{"email":"%s"},{"email":"%s"},{"email":"%s"}]`,
		emailFor("r7", 1, 10), emailFor("xr7", 2, 20), emailFor("r8", 3, 30), emailFor("r7", 4, 40)))
	var seqs []int64
	scanRows(msg, rowMarker("r7"), func(seq, ts int64) {
		if ts != seq*10 {
			t.Errorf("seq %d ts %d", seq, ts)
		}
		seqs = append(seqs, seq)
	})
	if fmt.Sprint(seqs) != "[1 4]" {
		t.Fatalf("seqs %v", seqs)
	}
}

func TestScanRowsMalformed(t *testing.T) {
	for _, s := range []string{
		`"load-r7-x-1@x"`,                    // not a number
		`"load-r7-1-2"`,                      // no @
		`"load-r7--2@x"`,                     // empty seq
		`"load-r7-1-99999999999999999999@x"`, // too long
	} {
		n := 0
		bad := scanRows([]byte(s), rowMarker("r7"), func(int64, int64) { n++ })
		if n != 0 || bad != 1 {
			t.Errorf("%s: rows %d bad %d", s, n, bad)
		}
	}
}

func TestStringField(t *testing.T) {
	msg := []byte(`{"type":"heartbeat","cursor":"1CgsKCWN1c3RvbWVy"}`)
	if got := string(stringField(msg, []byte(`"cursor":"`))); got != "1CgsKCWN1c3RvbWVy" {
		t.Fatalf("cursor %q", got)
	}
	if stringField(msg, []byte(`"epoch":"`)) != nil {
		t.Fatal("absent field found")
	}
}
