// Package event defines the JSON events the gateway delivers and encodes
// Vitess row changes into them.
//
// Events are encoded once, when they arrive from vtgate, into their final
// JSON bytes minus the trailing cursor member: every transport and every
// client then writes the same bytes, and fan-out costs no re-encoding.
package event

import querypb "vitess.io/vitess/go/vt/proto/query"

// Type is the "type" member of an event.
type Type string

// Event types. "change" carries a row; the others are control events.
const (
	TypeChange           Type = "change"
	TypeReshard          Type = "reshard"
	TypeMoved            Type = "moved"
	TypeBlocked          Type = "blocked"
	TypeResync           Type = "resync"
	TypeSnapshotComplete Type = "snapshot_complete"
	TypeDDL              Type = "ddl"
	TypeHeartbeat        Type = "heartbeat"
)

// Op is the "op" member of a change event.
type Op string

// Row operations. OpSnapshot is a row read by the copy phase.
const (
	OpInsert   Op = "insert"
	OpUpdate   Op = "update"
	OpDelete   Op = "delete"
	OpSnapshot Op = "snapshot"
)

// Event is one encoded event.
//
// JSON holds the complete object except its closing brace (and Tail), e.g.
// `{"type":"change","op":"insert",…,"commit_ts":"…"`; AppendJSON adds the
// cursor member (known only once the whole transaction has been read) and
// the brace. Keyspace and Table are kept beside the bytes so that per-token
// table scopes can be applied without decoding.
type Event struct {
	Type     Type
	Op       Op
	Keyspace string
	Shard    string
	Table    string
	JSON     []byte
	// CopyKey is the primary key of a copy-phase row (op snapshot), kept
	// so that a cursor can be made right after this row: a copy batch
	// holds thousands of rows, and a page or a message may stop inside it.
	CopyKey *CopyKey
	// Schema describes a change event's columns (nil for control events):
	// other formats re-encode the event from JSON and Schema (DESIGN §3.2).
	Schema *Schema
	// Tail, when set, follows JSON in the finished object: bytes that
	// several events share (in another format, a transaction's source
	// block or a table's schema, DESIGN §3.2), held once rather than once
	// per event. It is never written to.
	Tail []byte
}

// Size is the length of the event's bytes, JSON and Tail (without the
// cursor member and the closing brace).
func (e *Event) Size() int { return len(e.JSON) + len(e.Tail) }

// CopyKey is a copy-phase row's primary key as vtgate sends it: the key
// columns (FIELD entries) and their raw values.
type CopyKey struct {
	Fields []*querypb.Field // shared by every row of the table
	Values *querypb.Row
}

// AppendJSON appends the finished JSON object to dst, with a "cursor"
// member when cursor is not empty. cursor must be URL-safe (no escaping is
// done); cursor tokens always are.
func (e *Event) AppendJSON(dst []byte, cursor string) []byte {
	return append(e.appendMembers(dst, cursor), '}')
}

// AppendWithTxnEnd is AppendJSON for the last event of a transaction on a
// transport that marks where transactions end: the object gets a
// "txn_end":true member after the cursor.
func (e *Event) AppendWithTxnEnd(dst []byte, cursor string) []byte {
	return append(e.appendMembers(dst, cursor), `,"txn_end":true}`...)
}

// appendMembers appends the object without its closing brace.
func (e *Event) appendMembers(dst []byte, cursor string) []byte {
	dst = append(dst, e.JSON...)
	dst = append(dst, e.Tail...)
	if cursor != "" {
		dst = append(dst, `,"cursor":"`...)
		dst = append(dst, cursor...)
		dst = append(dst, '"')
	}
	return dst
}
