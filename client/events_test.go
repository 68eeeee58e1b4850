package client

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Every event type of openapi.yaml decodes to its Go type, in one pass.
func TestEventTypes(t *testing.T) {
	ts := time.Date(2026, 12, 2, 15, 1, 2, 0, time.UTC)
	for _, tc := range []struct {
		json string
		want Event
	}{
		{`{"type":"change","op":"update","keyspace":"customer","shard":"-80","table":"customer","key":{"customer_id":6},"before":{"customer_id":6,"email":"x@y.z"},"after":{"customer_id":6,"email":"new@y.z"},"commit_ts":"2026-12-02T15:01:02Z","cursor":"1aQ","txn_end":true}`,
			&Change{Op: Update, Keyspace: "customer", Shard: "-80", Table: "customer", Key: json.RawMessage(`{"customer_id":6}`),
				Before: json.RawMessage(`{"customer_id":6,"email":"x@y.z"}`), After: json.RawMessage(`{"customer_id":6,"email":"new@y.z"}`), CommitTS: ts}},
		{`{"type":"change","op":"snapshot","keyspace":"customer","shard":"0","table":"customer","key":null,"before":null,"after":{"a":1},"commit_ts":null,"cursor":"1a"}`,
			&Change{Op: Snapshot, Keyspace: "customer", Shard: "0", Table: "customer", After: json.RawMessage(`{"a":1}`)}},
		{`{"type":"reshard","keyspace":"customer","from":["0"],"to":["-80","80-"],"journal_id":"18446744073709551615","cursor":"1a"}`,
			&Reshard{Keyspace: "customer", From: []string{"0"}, To: []string{"-80", "80-"}, JournalID: "18446744073709551615"}},
		{`{"type":"moved","keyspace":"customer","tables":["corder"],"from":"customer","to":"commerce","journal":"j1","cursor":"1a"}`,
			&Moved{Keyspace: "customer", Tables: []string{"corder"}, From: "customer", To: "commerce", Journal: "j1"}},
		{`{"type":"blocked","keyspace":"customer","reason":"partial_move","tables":["customer"],"from":"customer","to":"commerce","journal":"j1","message":"m","cursor":"1a"}`,
			&Blocked{Keyspace: "customer", Reason: "partial_move", Tables: []string{"customer"}, From: "customer", To: "commerce", Journal: "j1", Message: "m"}},
		{`{"type":"resync","keyspace":"customer","reason":"store_lost","subscriber":"alice","lost_at":"2026-12-02T15:01:02Z","missing":["0"],"message":"m","cursor":"1a"}`,
			&Resync{Keyspace: "customer", Reason: "store_lost", Subscriber: "alice", LostAt: ts, Missing: []string{"0"}, Message: "m"}},
		{`{"type":"resync","keyspace":"customer","reason":"tables_moved","from":"customer","to":"commerce","tables":[],"cursor":"1a"}`,
			&Resync{Keyspace: "customer", Reason: "tables_moved", From: "customer", To: "commerce", Tables: []string{}}},
		{`{"type":"snapshot_complete","keyspace":"customer","cursor":"1a"}`, &SnapshotComplete{Keyspace: "customer"}},
		{`{"type":"ddl","keyspace":"customer","shard":"0","statement":"alter table t add c int","cursor":"1a"}`,
			&DDL{Keyspace: "customer", Shard: "0", Statement: "alter table t add c int"}},
		{`{"type":"newer","cursor":"1a"}`, &Unknown{Kind: "newer"}},
	} {
		var w wireEvent
		if err := json.Unmarshal([]byte(tc.json), &w); err != nil {
			t.Fatal(err)
		}
		got, err := w.event()
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if !reflect.DeepEqual(got, tc.want) || got.Type() != tc.want.Type() {
			t.Errorf("%s:\n got %#v\nwant %#v", tc.json, got, tc.want)
		}
	}
	var w wireEvent
	json.Unmarshal([]byte(`{"cursor":"1a"}`), &w)
	if _, err := w.event(); err == nil {
		t.Error("an event without a type decoded")
	}
}

// A transaction ends where its transport says, and only with a cursor
// outside a transaction.
func TestAssembler(t *testing.T) {
	var a assembler
	ev := &wireEvent{Type: "change", Op: Insert}
	for _, step := range []struct {
		ends   bool
		cursor string
		whole  int // events of the transaction it ends, 0: none
	}{
		{false, "", 0}, {true, "2inside", 0}, {true, "1end", 3}, {true, "1next", 1},
	} {
		txn, err := a.add(ev, step.ends, step.cursor)
		if err != nil {
			t.Fatal(err)
		}
		if (txn == nil) != (step.whole == 0) || txn != nil && (len(txn.Events) != step.whole || txn.Cursor != step.cursor) {
			t.Fatalf("after an event ending=%v at %q: %+v, want %d events", step.ends, step.cursor, txn, step.whole)
		}
	}
	if a.pending() {
		t.Fatal("events pending after a whole transaction")
	}
}

// A JWT's exp and iat are read without verifying it; anything else has
// none.
func TestJWTTimes(t *testing.T) {
	// {"sub":"a","exp":2000000000,"iat":1999999000}
	exp, iat := jwtTimes("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIiwiZXhwIjoyMDAwMDAwMDAwLCJpYXQiOjE5OTk5OTkwMDB9.sig")
	if exp.Unix() != 2000000000 || iat.Unix() != 1999999000 {
		t.Fatalf("exp %v iat %v", exp, iat)
	}
	for _, tok := range []string{"", "opaque", "a.b.c", "a.e30.c"} {
		if exp, _ := jwtTimes(tok); !exp.IsZero() {
			t.Errorf("%q: exp %v", tok, exp)
		}
	}
}

// Full jitter: every wait is below a cap that doubles from lo to hi, and
// starts over after progress.
func TestFullJitter(t *testing.T) {
	b := newFullJitter(100*time.Millisecond, time.Second)
	b.Reset()
	for i, cap := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		cap *= time.Millisecond
		if d := b.NextBackOff(); d < 0 || d > cap {
			t.Fatalf("wait %d: %v, cap %v", i, d, cap)
		}
	}
	b.progressed()
	if d := b.NextBackOff(); d > 100*time.Millisecond {
		t.Fatalf("after progress: %v", d)
	}
}
