package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
)

// A spool holds the transactions a bridge captured from old shards before
// they were deleted (DESIGN §4 rule 3): one store log entry per transaction,
// already encoded, with the position after it.
type spoolEntry struct {
	V  []byte       `json:"v"` // VGtid after the transaction (protobuf)
	TS int64        `json:"ts,omitempty"`
	E  []spoolEvent `json:"e"`
	// P and C are a chunked transaction's piece marks (DESIGN §3.1):
	// a spool keeps the pieces as they came.
	P bool `json:"p,omitempty"`
	C bool `json:"c,omitempty"`
	// X holds the schemas of the entry's change events (event.Schema),
	// each once, which other formats re-encode them with (DESIGN §3.2).
	X []json.RawMessage `json:"x,omitempty"`
}

type spoolEvent struct {
	T event.Type      `json:"t"`
	O event.Op        `json:"o,omitempty"`
	K string          `json:"k,omitempty"`
	S string          `json:"s,omitempty"`
	N string          `json:"n,omitempty"`
	J json.RawMessage `json:"j"`           // the finished event without cursor
	X int             `json:"x,omitempty"` // 1 + its schema's index in the entry's X; 0: none
}

// EncodeSpoolEntry is t as a spool log entry holds it: its position, its
// commit time, its piece marks and its events' finished bytes. A bridge
// appends one per captured transaction; DecodeSpoolEntry reads it back.
func EncodeSpoolEntry(t *source.Txn) ([]byte, error) {
	v, err := position.Of(t.VGtid).Marshal()
	if err != nil {
		return nil, err
	}
	e := spoolEntry{V: v, TS: t.CommitTS, E: make([]spoolEvent, len(t.Events)), P: t.Partial, C: t.Continued}
	var schemas map[*event.Schema]int
	for i := range t.Events {
		ev := &t.Events[i]
		e.E[i] = spoolEvent{T: ev.Type, O: ev.Op, K: ev.Keyspace, S: ev.Shard, N: ev.Table, J: ev.AppendJSON(nil, "")}
		if ev.Schema == nil {
			continue
		}
		x, ok := schemas[ev.Schema]
		if !ok {
			b, err := event.MarshalSchema(ev.Schema)
			if err != nil {
				return nil, err
			}
			if schemas == nil {
				schemas = make(map[*event.Schema]int)
			}
			e.X = append(e.X, b)
			x = len(e.X)
			schemas[ev.Schema] = x
		}
		e.E[i].X = x
	}
	return json.Marshal(&e)
}

// DecodeSpoolEntry is the transaction EncodeSpoolEntry encoded into b.
func DecodeSpoolEntry(b []byte) (*source.Txn, error) {
	var e spoolEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	v, err := position.Unmarshal(e.V)
	if err != nil {
		return nil, err
	}
	t := &source.Txn{VGtid: v.VGtid(), CommitTS: e.TS, Events: make([]event.Event, len(e.E)), Partial: e.P, Continued: e.C}
	schemas := make([]*event.Schema, len(e.X))
	for i, b := range e.X {
		if schemas[i], err = event.UnmarshalSchema(b); err != nil {
			return nil, fmt.Errorf("spool: malformed schema: %w", err)
		}
	}
	for i, se := range e.E {
		j := []byte(se.J)
		if len(j) == 0 || j[len(j)-1] != '}' {
			return nil, fmt.Errorf("spool: malformed event")
		}
		if se.X < 0 || se.X > len(schemas) {
			return nil, fmt.Errorf("spool: event %d names schema %d of %d", i, se.X, len(schemas))
		}
		t.Events[i] = event.Event{Type: se.T, Op: se.O, Keyspace: se.K, Shard: se.S, Table: se.N, JSON: j[:len(j)-1]}
		if se.X > 0 {
			t.Events[i].Schema = schemas[se.X-1]
		}
	}
	return t, nil
}

// ErrSpoolGone is a reader's error when the spool it replays no longer
// holds what its bridge recorded: it was deleted under the reader (freed
// after the subscriber acked past it and the grace had passed, DESIGN §4
// rule 3). Reading on would skip the rest of it, so the reader fails; the
// subscriber's stored cursor, past the spool, is where it resumes.
var ErrSpoolGone = errors.New("bridge spool is gone: the subscriber acked past it; reconnect as the subscriber without a cursor to resume from its stored cursor")

// spoolSource replays a spool from after seq, then ends with io.EOF.
//
// A reader whose position is not a spool entry's (another replica, or a
// VStream of its own, interleaved the shards differently) joins per shard,
// as on the tail (DESIGN §5.3): it skips the entries its position holds on
// every shard they move and gets the rest, its own position advanced on the
// shards each moves, until it stands where an entry does.
type spoolSource struct {
	st    store.Store
	log   string
	after uint64
	buf   []*source.Txn
	done  bool
	err   error

	// want is the spool's last sequence number as its bridge recorded it
	// (0 in bridges recorded before it was, which have only events, the
	// number of events spooled): a read that ends before it found the
	// spool deleted, not ended (gone).
	want   uint64
	events int

	// join: keyspace of the spooled shards; pos the reader's position
	// (nil once it is an entry's); prev the position before the next entry.
	keyspace  string
	pos, prev *binlogdatapb.VGtid
	// has: the reader holds the chunked transaction whose pieces are
	// being read (they are skipped, like its last piece).
	has bool
}

// SpoolPage is how many entries a spool reader reads from the store at a
// time. What it has read it delivers, even once the spool is deleted under
// it (it fails with ErrSpoolGone only after them).
const SpoolPage = 256

func (s *spoolSource) fill(ctx context.Context) {
	if len(s.buf) > 0 || s.done || s.err != nil {
		return
	}
	entries, err := s.st.ReadLog(ctx, s.log, s.after, SpoolPage)
	if err != nil {
		s.err = fmt.Errorf("read spool %s: %w", s.log, err)
		return
	}
	if len(entries) < SpoolPage {
		s.done = true
	}
	for _, e := range entries {
		t, err := DecodeSpoolEntry(e.Value)
		if err != nil {
			s.err = fmt.Errorf("spool %s entry %d: %w", s.log, e.Seq, err)
			return
		}
		s.after = e.Seq
		if s.join(t) {
			s.buf = append(s.buf, t)
		}
	}
	if s.done {
		s.err = s.gone(ctx)
	}
}

// gone reports ErrSpoolGone when the spool, read to its end up to entry
// s.after, lacks entries its bridge recorded. A deleted log reads as an
// empty one on both stores, and its sequence numbers start again at 0, so
// for a bridge that recorded its last sequence number the entries read say
// it; for an older one the store's last sequence number does (0 for a
// deleted log, which held entries if the bridge spooled events).
func (s *spoolSource) gone(ctx context.Context) error {
	if s.want > 0 {
		if s.after >= s.want {
			return nil
		}
		return fmt.Errorf("%w (%s ends at entry %d of %d)", ErrSpoolGone, s.log, s.after, s.want)
	}
	last, err := s.st.Append(ctx, s.log)
	if err != nil {
		return fmt.Errorf("read spool %s: %w", s.log, err)
	}
	if last < s.after || (last == 0 && s.events > 0) {
		return fmt.Errorf("%w (%s holds no entry; its bridge spooled %d events)", ErrSpoolGone, s.log, s.events)
	}
	return nil
}

// join reports whether the reader still needs t, and gives it the reader's
// position after it.
func (s *spoolSource) join(t *source.Txn) bool {
	if s.pos == nil {
		return true
	}
	if t.Partial {
		// A piece of a chunked transaction (DESIGN §3.1) is at the
		// position before it and moves no shard: whether the reader has
		// the transaction is told by its shard, where a reader past the
		// position before it has it (it is the shard's next one).
		if !t.Continued {
			s.has = s.ahead(t)
		}
		if s.has {
			return false
		}
		if position.Of(s.pos).Identical(position.Of(t.VGtid)) {
			s.pos = nil
		} else {
			t.VGtid = s.pos
		}
		return true
	}
	s.has = false
	moved := position.Of(s.prev).Moved(position.Of(t.VGtid))
	s.prev = t.VGtid
	if len(moved) > 0 && position.Of(s.pos).Holds(s.keyspace, position.Of(t.VGtid), moved) {
		return false
	}
	s.pos = position.Of(s.pos).Advance(position.Of(t.VGtid), moved).VGtid()
	if position.Of(s.pos).Identical(position.Of(t.VGtid)) {
		s.pos = nil
	} else {
		t.VGtid = s.pos
	}
	return true
}

// ahead reports whether the reader's position is past t's (the position
// before t's transaction) on the shard t's events are on.
func (s *spoolSource) ahead(t *source.Txn) bool {
	if len(t.Events) == 0 {
		return false
	}
	shard := t.Events[0].Shard
	mine, ok1 := position.Of(s.pos).Lookup(s.keyspace, shard)
	before, ok2 := position.Of(t.VGtid).Lookup(s.keyspace, shard)
	return ok1 && ok2 && mine.Compare(before) == position.After
}

func (s *spoolSource) Next(ctx context.Context) (*source.Txn, error) {
	s.fill(ctx)
	if s.err != nil {
		return nil, s.err
	}
	if len(s.buf) == 0 {
		return nil, io.EOF
	}
	t := s.buf[0]
	s.buf = s.buf[1:]
	return t, nil
}

func (s *spoolSource) TryNext() (*source.Txn, bool, error) {
	t, err := s.Next(context.Background())
	if err != nil {
		return nil, false, err
	}
	return t, true, nil
}

func (s *spoolSource) Buffered() int {
	if len(s.buf) == 0 && !s.done {
		return 1 // more in the store: never idle while spooling
	}
	return len(s.buf)
}

func (s *spoolSource) Close() {}
