package source

import (
	"sync"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// Encodings holds a transaction's events re-encoded in other formats (the
// Debezium envelope, DESIGN §3.2), made on the first reader's demand and
// shared by every later reader of the transaction: fan-out still encodes a
// transaction once per format, not once per reader. The assembler gives
// each transaction it emits one; transactions made elsewhere (control
// notices, spools) have none and are re-encoded per reader.
type Encodings struct {
	mu sync.Mutex
	m  map[string]encoded
}

// encoded is one format's events, with what they were made from: a copy
// of a Txn (another VGtid, a subset of the events) shares the Encodings
// pointer but must not share its results.
type encoded struct {
	first  *event.Event
	n      int
	vgtid  any
	events []event.Event
}

// Encoded returns t's events in the format named key, made by enc on the
// first call for t and key and remembered for the next ones (when t has
// Encodings and the same events and position). enc runs under the
// transaction's lock: a second reader waits for the first one's result
// rather than encoding the same events again.
func (t *Txn) Encoded(key string, enc func(*Txn) []event.Event) []event.Event {
	c := t.encodings
	if c == nil || len(t.Events) == 0 {
		return enc(t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.first == &t.Events[0] && e.n == len(t.Events) && e.vgtid == any(t.VGtid) {
		return e.events
	}
	out := enc(t)
	if c.m == nil {
		c.m = make(map[string]encoded, 1)
	}
	c.m[key] = encoded{first: &t.Events[0], n: len(t.Events), vgtid: t.VGtid, events: out}
	return out
}
