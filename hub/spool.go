package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

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
}

type spoolEvent struct {
	T event.Type      `json:"t"`
	O event.Op        `json:"o,omitempty"`
	K string          `json:"k,omitempty"`
	S string          `json:"s,omitempty"`
	N string          `json:"n,omitempty"`
	J json.RawMessage `json:"j"` // the finished event without cursor
}

func encodeSpoolEntry(t *source.Txn) ([]byte, error) {
	v, err := position.Of(t.VGtid).Marshal()
	if err != nil {
		return nil, err
	}
	e := spoolEntry{V: v, TS: t.CommitTS, E: make([]spoolEvent, len(t.Events))}
	for i := range t.Events {
		ev := &t.Events[i]
		e.E[i] = spoolEvent{T: ev.Type, O: ev.Op, K: ev.Keyspace, S: ev.Shard, N: ev.Table, J: ev.AppendJSON(nil, "")}
	}
	return json.Marshal(&e)
}

func decodeSpoolEntry(b []byte) (*source.Txn, error) {
	var e spoolEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	v, err := position.Unmarshal(e.V)
	if err != nil {
		return nil, err
	}
	t := &source.Txn{VGtid: v.VGtid(), CommitTS: e.TS, Events: make([]event.Event, len(e.E))}
	for i, se := range e.E {
		j := []byte(se.J)
		if len(j) == 0 || j[len(j)-1] != '}' {
			return nil, fmt.Errorf("spool: malformed event")
		}
		t.Events[i] = event.Event{Type: se.T, Op: se.O, Keyspace: se.K, Shard: se.S, Table: se.N, JSON: j[:len(j)-1]}
	}
	return t, nil
}

// spoolSource replays a spool from after seq, then ends with io.EOF.
type spoolSource struct {
	st    store.Store
	log   string
	after uint64
	buf   []*source.Txn
	done  bool
	err   error
}

const spoolPage = 256

func (s *spoolSource) fill(ctx context.Context) {
	if len(s.buf) > 0 || s.done || s.err != nil {
		return
	}
	entries, err := s.st.ReadLog(ctx, s.log, s.after, spoolPage)
	if err != nil {
		s.err = fmt.Errorf("read spool %s: %w", s.log, err)
		return
	}
	if len(entries) < spoolPage {
		s.done = true
	}
	for _, e := range entries {
		t, err := decodeSpoolEntry(e.Value)
		if err != nil {
			s.err = fmt.Errorf("spool %s entry %d: %w", s.log, e.Seq, err)
			return
		}
		s.buf = append(s.buf, t)
		s.after = e.Seq
	}
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
