package auth

import (
	"bytes"
	"encoding/json"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// Control events that name tables (a "tables" member: moved, blocked,
// resync) would tell a token about tables outside its scope. Each reader
// gets them with the tables of its scope only; one about none of them is
// not sent, since it says nothing about what the reader reads — except a
// resync that restarts the reader (a fresh snapshot follows: every reason
// but tables_dropped), which the reader must see whatever it names. A
// table counts as in scope in the event's keyspace or, for a move, in its
// "from" or "to" keyspace: the tables are both. reshard events name a
// keyspace's shards, not tables, and the stream's keyspace is the one the
// reader reads: they always pass.

// namesTables reports whether events of typ may carry a "tables" member.
func namesTables(typ event.Type) bool {
	return typ == event.TypeMoved || typ == event.TypeBlocked || typ == event.TypeResync
}

var tablesMember = []byte(`"tables":`)

// scopeControl returns whether the control event e may be sent and, when
// its tables had to be narrowed, the event to send instead. e itself is
// never modified: the same transaction goes to other readers.
func (f *TableFilter) scopeControl(e *event.Event) (keep bool, narrowed *event.Event) {
	if !bytes.Contains(e.JSON, tablesMember) {
		return true, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(append(append([]byte(nil), e.JSON...), '}'), &m) != nil {
		return false, nil // not ours to guess: a control event is encoded by the gateway
	}
	var (
		tables           []string
		from, to, reason string
	)
	if json.Unmarshal(m["tables"], &tables) != nil {
		return false, nil
	}
	json.Unmarshal(m["from"], &from)
	json.Unmarshal(m["to"], &to)
	json.Unmarshal(m["reason"], &reason)
	kept := make([]string, 0, len(tables))
	for _, t := range tables {
		if f.allowsIn(t, e.Keyspace, from, to) {
			kept = append(kept, t)
		}
	}
	restarts := e.Type == event.TypeResync && reason != "tables_dropped"
	switch {
	case len(kept) == len(tables):
		return true, nil
	case len(kept) == 0 && !restarts:
		return false, nil
	}
	m["tables"], _ = json.Marshal(kept)
	b, _ := json.Marshal(m) // keys sorted, as source.Control encodes them
	out := *e
	out.JSON = b[:len(b)-1]
	return true, &out
}

// allowsIn reports whether table is in scope in one of the keyspaces.
func (f *TableFilter) allowsIn(table string, keyspaces ...string) bool {
	for _, ks := range keyspaces {
		if ks != "" && f.Allows(ks, table) {
			return true
		}
	}
	return false
}
