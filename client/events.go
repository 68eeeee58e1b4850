package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// Txn is one whole transaction of the stream: its events in commit
// order, and the cursor right after it.
type Txn struct {
	// Cursor resumes right after this transaction. Opaque: store it as is.
	Cursor string
	// Events are *Change rows and control events (*Reshard, *Resync,
	// *Moved, *Blocked, *SnapshotComplete, *DDL, *Unknown).
	Events []Event

	seq uint64 // order of receipt, for Commit
}

// Changes returns the transaction's row changes.
func (t *Txn) Changes() []*Change {
	out := make([]*Change, 0, len(t.Events))
	for _, e := range t.Events {
		if c, ok := e.(*Change); ok {
			out = append(out, c)
		}
	}
	return out
}

// Event is one event of a transaction; tell them apart with a type
// switch. Type is the event's "type" on the wire.
type Event interface {
	Type() string
}

// Op is what a Change did to its row.
type Op string

const (
	Insert Op = "insert"
	Update Op = "update"
	Delete Op = "delete"
	// Snapshot is a row read by a copy phase (a stream that starts with a
	// snapshot, or the snapshot after a resync): treat it as an upsert.
	Snapshot Op = "snapshot"
)

// Change is one row change (openapi.yaml, ChangeEvent). Key, Before and
// After are JSON objects of column values (event/TYPES.md says how each
// MySQL type is written; integers keep all their digits, so decode with
// json.Decoder.UseNumber or into int64 fields), or nil where the wire
// has null.
type Change struct {
	Op       Op
	Keyspace string
	Shard    string
	Table    string
	// Key is the primary key (of Before for a delete, else of After).
	Key    json.RawMessage
	Before json.RawMessage // update, delete
	After  json.RawMessage // insert, update, snapshot
	// CommitTS is the transaction's commit time (whole seconds); zero for
	// snapshot rows.
	CommitTS time.Time
}

func (*Change) Type() string { return "change" }

// Row is the row as it is after the change, or as it was before a
// delete.
func (c *Change) Row() json.RawMessage {
	if c.Op == Delete {
		return c.Before
	}
	return c.After
}

// Reshard: the keyspace was resharded and the stream moved from the From
// shards to the To shards. Informational: nothing was lost.
type Reshard struct {
	Keyspace  string
	From, To  []string
	JournalID string
}

func (*Reshard) Type() string { return "reshard" }

// Resync: exact resume was impossible (Reason: shards_gone, store_lost,
// tables_moved, tables_dropped). Except after tables_dropped, a fresh
// snapshot follows (Snapshot rows, then SnapshotComplete): the
// application must discard everything it derived from earlier events and
// rebuild from the snapshot.
type Resync struct {
	Keyspace string
	Reason   string
	// From and To: with tables_moved, the keyspaces the tables left and
	// moved to.
	From, To string
	Tables   []string
	Missing  []string // the shards the cursor needed that are gone
	// Subscriber and LostAt: with store_lost.
	Subscriber string
	LostAt     time.Time
	Message    string
}

func (*Resync) Type() string { return "resync" }

// Moved: the stream's Tables moved from keyspace From to To (a MoveTables
// cutover); what follows comes from To. Informational: nothing was lost.
type Moved struct {
	Keyspace string
	Tables   []string
	From, To string
	Journal  string
}

func (*Moved) Type() string { return "moved" }

// Blocked: a MoveTables cutover moved only some of the stream's tables
// (Reason partial_move); the stream stays on From, where the moved Tables
// get no new rows.
type Blocked struct {
	Keyspace string
	Reason   string
	Tables   []string
	From, To string
	Journal  string
	Message  string
}

func (*Blocked) Type() string { return "blocked" }

// SnapshotComplete: the copy phase finished; live changes follow.
type SnapshotComplete struct{ Keyspace string }

func (*SnapshotComplete) Type() string { return "snapshot_complete" }

// DDL is a schema change on one shard; later changes use the new columns.
type DDL struct {
	Keyspace, Shard, Statement string
}

func (*DDL) Type() string { return "ddl" }

// Unknown is an event of a type this package does not know (a newer
// gateway's).
type Unknown struct{ Kind string }

func (u *Unknown) Type() string { return u.Kind }

// wireEvent is every member an event can have, decoded in one pass: row
// changes are most of the traffic. From and To are arrays in reshard
// events and strings in the others, so they are decoded by type later.
type wireEvent struct {
	Type       string          `json:"type"`
	Op         Op              `json:"op"`
	Keyspace   string          `json:"keyspace"`
	Shard      string          `json:"shard"`
	Table      string          `json:"table"`
	Key        json.RawMessage `json:"key"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
	CommitTS   time.Time       `json:"commit_ts"`
	Cursor     string          `json:"cursor"`
	TxnEnd     bool            `json:"txn_end"`
	From       json.RawMessage `json:"from"`
	To         json.RawMessage `json:"to"`
	JournalID  string          `json:"journal_id"`
	Journal    string          `json:"journal"`
	Tables     []string        `json:"tables"`
	Reason     string          `json:"reason"`
	Message    string          `json:"message"`
	Missing    []string        `json:"missing"`
	Subscriber string          `json:"subscriber"`
	LostAt     time.Time       `json:"lost_at"`
	Statement  string          `json:"statement"`
}

// event converts w to its Event.
func (w *wireEvent) event() (Event, error) {
	switch w.Type {
	case "change":
		return &Change{Op: w.Op, Keyspace: w.Keyspace, Shard: w.Shard, Table: w.Table,
			Key: orNil(w.Key), Before: orNil(w.Before), After: orNil(w.After), CommitTS: w.CommitTS}, nil
	case "reshard":
		r := &Reshard{Keyspace: w.Keyspace, JournalID: w.JournalID}
		return r, firstErr(unmarshalOpt(w.From, &r.From), unmarshalOpt(w.To, &r.To))
	case "resync":
		r := &Resync{Keyspace: w.Keyspace, Reason: w.Reason, Tables: w.Tables, Missing: w.Missing,
			Subscriber: w.Subscriber, LostAt: w.LostAt, Message: w.Message}
		return r, firstErr(unmarshalOpt(w.From, &r.From), unmarshalOpt(w.To, &r.To))
	case "moved":
		m := &Moved{Keyspace: w.Keyspace, Tables: w.Tables, Journal: w.Journal}
		return m, firstErr(unmarshalOpt(w.From, &m.From), unmarshalOpt(w.To, &m.To))
	case "blocked":
		b := &Blocked{Keyspace: w.Keyspace, Reason: w.Reason, Tables: w.Tables, Journal: w.Journal, Message: w.Message}
		return b, firstErr(unmarshalOpt(w.From, &b.From), unmarshalOpt(w.To, &b.To))
	case "snapshot_complete":
		return &SnapshotComplete{Keyspace: w.Keyspace}, nil
	case "ddl":
		return &DDL{Keyspace: w.Keyspace, Shard: w.Shard, Statement: w.Statement}, nil
	case "":
		return nil, fmt.Errorf("an event without a type")
	}
	return &Unknown{Kind: w.Type}, nil
}

func orNil(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return nil
	}
	return m
}

func unmarshalOpt(m json.RawMessage, v any) error {
	if len(m) == 0 {
		return nil
	}
	return json.Unmarshal(m, v)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// inside reports whether cursor lies inside a huge transaction (a pull
// page's next_cursor of version 2): never a place to commit or ack.
func inside(cursor string) bool { return len(cursor) > 0 && cursor[0] == '2' }

// assembler collects the events of one transaction until its end: a
// transaction can come in several messages (a huge one in pieces,
// DESIGN §3.1), and only its end carries the cursor to commit.
type assembler struct {
	events []Event
}

// add appends w's event; it returns the whole transaction when w ends it.
func (a *assembler) add(w *wireEvent, ends bool, cursor string) (*Txn, error) {
	e, err := w.event()
	if err != nil {
		return nil, err
	}
	a.events = append(a.events, e)
	if !ends || cursor == "" || inside(cursor) {
		return nil, nil
	}
	t := &Txn{Cursor: cursor, Events: a.events}
	a.events = nil
	return t, nil
}

// pending reports whether part of a transaction has arrived.
func (a *assembler) pending() bool { return len(a.events) > 0 }
