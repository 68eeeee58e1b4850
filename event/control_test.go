package event

import (
	"encoding/json"
	"testing"
)

// A control event is an object of its own members: type, keyspace and shard
// when given, its fields, and the cursor a transport adds.
func TestControl(t *testing.T) {
	e := Control(TypeResync, "customer", "", map[string]any{"reason": "tables_moved", "tables": []string{"t"}})
	if e.Type != TypeResync || e.Keyspace != "customer" || e.Shard != "" {
		t.Fatalf("event %+v", e)
	}
	var m map[string]any
	if err := json.Unmarshal(e.AppendJSON(nil, "c1"), &m); err != nil {
		t.Fatalf("%s: %v", e.AppendJSON(nil, "c1"), err)
	}
	if m["type"] != "resync" || m["keyspace"] != "customer" || m["reason"] != "tables_moved" || m["cursor"] != "c1" {
		t.Fatalf("members %v", m)
	}
	if _, ok := m["shard"]; ok {
		t.Fatalf("an empty shard is a member: %v", m)
	}
}
