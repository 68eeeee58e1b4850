package event

import "encoding/json"

// Control encodes a control event of typ (resync, reshard, moved,
// blocked, ddl, snapshot_complete…): its type, keyspace and shard, and
// fields as members of their own. They are rare, so encoding/json is fine.
func Control(typ Type, keyspace, shard string, fields map[string]any) Event {
	m := map[string]any{"type": typ}
	if keyspace != "" {
		m["keyspace"] = keyspace
	}
	if shard != "" {
		m["shard"] = shard
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return Event{Type: typ, Keyspace: keyspace, Shard: shard, JSON: b[:len(b)-1]}
}
