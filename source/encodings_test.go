package source

import (
	"sync"
	"sync/atomic"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// A transaction is re-encoded once per format however many readers ask at
// once; a copy of it with other events or another position gets its own
// encoding, never the original's.
func TestEncodedOnce(t *testing.T) {
	t.Parallel()
	evs := []event.Event{{Type: event.TypeChange, JSON: []byte(`{"a"`)}, {Type: event.TypeChange, JSON: []byte(`{"b"`)}}
	txn := &Txn{Events: evs, VGtid: &binlogdatapb.VGtid{}, encodings: new(Encodings)}
	var calls atomic.Int32
	enc := func(t *Txn) []event.Event {
		calls.Add(1)
		out := make([]event.Event, len(t.Events))
		for i := range t.Events {
			out[i] = t.Events[i]
			out[i].JSON = append([]byte("x"), t.Events[i].JSON...)
		}
		return out
	}
	var wg sync.WaitGroup
	results := make([][]event.Event, 16)
	for i := range results {
		wg.Go(func() { results[i] = txn.Encoded("f", enc) })
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("encoded %d times, want once", n)
	}
	for _, r := range results {
		if &r[0] != &results[0][0] {
			t.Fatal("readers got different encodings")
		}
	}
	if txn.Encoded("g", enc); calls.Load() != 2 {
		t.Fatal("another format was not encoded")
	}

	sub := *txn
	sub.Events = evs[1:]
	if got := sub.Encoded("f", enc); len(got) != 1 || string(got[0].JSON) != `x{"b"` {
		t.Fatalf("a copy with fewer events got %d events", len(got))
	}
	moved := *txn
	moved.VGtid = &binlogdatapb.VGtid{}
	if moved.Encoded("f", enc); calls.Load() != 4 {
		t.Fatalf("a copy at another position reused the original's encoding (%d calls)", calls.Load())
	}
	// Without Encodings (transactions made outside the assembler) every
	// call encodes.
	plain := &Txn{Events: evs, VGtid: txn.VGtid}
	plain.Encoded("f", enc)
	plain.Encoded("f", enc)
	if calls.Load() != 6 {
		t.Fatalf("%d calls, want 6", calls.Load())
	}
}
