package auth

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// control encodes a control event as source.Control does.
func control(typ event.Type, keyspace string, fields map[string]any) event.Event {
	m := map[string]any{"type": typ, "keyspace": keyspace}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return event.Event{Type: typ, Keyspace: keyspace, JSON: b[:len(b)-1]}
}

// Control events naming tables reach a reader with the tables of its
// scope only, and not at all when they name none of them — except a
// resync that restarts the reader. reshard and table-less resyncs pass
// as they are; the events given are never modified.
func TestFilterControlEvents(t *testing.T) {
	f := NewTableFilter([]string{"customer.customer"})
	both := []string{"customer", "corder"}
	cases := []struct {
		name   string
		e      event.Event
		tables []string // the tables sent; nil: not sent
	}{
		{"moved, one in scope in the target keyspace", control(event.TypeMoved, "commerce", map[string]any{"tables": both, "from": "commerce", "to": "customer"}), []string{"customer"}},
		{"moved, none in scope", control(event.TypeMoved, "commerce", map[string]any{"tables": []string{"corder"}, "from": "commerce", "to": "customer"}), nil},
		{"blocked, one in scope", control(event.TypeBlocked, "customer", map[string]any{"tables": both, "from": "customer", "to": "other"}), []string{"customer"}},
		{"blocked, none in scope", control(event.TypeBlocked, "customer", map[string]any{"tables": []string{"corder"}, "from": "customer", "to": "other"}), nil},
		{"resync tables_dropped, none in scope", control(event.TypeResync, "customer", map[string]any{"tables": []string{"corder"}, "reason": "tables_dropped"}), nil},
		{"resync tables_dropped, all in scope", control(event.TypeResync, "customer", map[string]any{"tables": []string{"customer"}, "reason": "tables_dropped"}), []string{"customer"}},
		{"resync tables_moved restarts the reader", control(event.TypeResync, "customer", map[string]any{"tables": []string{"corder"}, "reason": "tables_moved", "from": "customer", "to": "x"}), []string{}},
	}
	for _, c := range cases {
		orig := string(c.e.JSON)
		got := f.Filter([]event.Event{c.e})
		if string(c.e.JSON) != orig {
			t.Errorf("%s: the event given was modified", c.name)
		}
		if c.tables == nil {
			if len(got) != 0 {
				t.Errorf("%s: sent %s", c.name, got[0].JSON)
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: not sent", c.name)
			continue
		}
		var m struct{ Tables []string }
		if err := json.Unmarshal(append(got[0].JSON, '}'), &m); err != nil || !slices.Equal(m.Tables, c.tables) {
			t.Errorf("%s: sent %s}, want tables %q", c.name, got[0].JSON, c.tables)
		}
	}

	// Passed as they are: a reshard, a resync without tables, and every
	// control event for a token that reads every table.
	for _, e := range []event.Event{
		control(event.TypeReshard, "customer", map[string]any{"from": []string{"0"}, "to": []string{"-80", "80-"}}),
		control(event.TypeResync, "customer", map[string]any{"reason": "shards_gone", "missing": []string{"0"}}),
	} {
		if got := f.Filter([]event.Event{e}); len(got) != 1 || string(got[0].JSON) != string(e.JSON) {
			t.Errorf("%s changed or withheld: %v", e.JSON, got)
		}
	}
	moved := control(event.TypeMoved, "commerce", map[string]any{"tables": []string{"corder"}, "from": "commerce", "to": "customer"})
	if got := NewTableFilter([]string{"*"}).Filter([]event.Event{moved}); len(got) != 1 || string(got[0].JSON) != string(moved.JSON) {
		t.Error("a token reading every table does not get a moved event as it is")
	}
}
