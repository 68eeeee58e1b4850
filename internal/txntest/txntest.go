// Package txntest holds what the tests of the packages that read
// transactions (hub, bridge, feed) check them with: one rendering of a
// transaction's events, one position comparison.
package txntest

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/event"
	"github.com/vstream-gateway/vstream-gateway/source"
)

// Summary renders a transaction's events compactly: change events as the
// ids they insert ("1 2"), control events as their type.
func Summary(t testing.TB, txn *source.Txn) string {
	t.Helper()
	var parts []string
	for _, e := range txn.Events {
		if e.Type != event.TypeChange {
			parts = append(parts, string(e.Type))
			continue
		}
		var m struct{ After struct{ ID json.Number } }
		if err := json.Unmarshal(e.AppendJSON(nil, ""), &m); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, m.After.ID.String())
	}
	return strings.Join(parts, " ")
}

// Member is the raw JSON of an event's member name.
func Member(t testing.TB, e event.Event, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(e.AppendJSON(nil, ""), &m); err != nil {
		t.Fatal(err)
	}
	return string(m[name])
}

// SamePos fails the test unless got is want.
func SamePos(t testing.TB, what string, got, want *binlogdatapb.VGtid) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s: position %v, want %v", what, got, want)
	}
}
