package vtlocal

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestAssignUID(t *testing.T) {
	c, err := New(WithDataRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ks, shard string
		want      int
	}{
		{"commerce", "0", 100},
		{"customer", "0", 200},
		{"customer", "80-", 400}, // the example's uid even when assigned out of order
		{"customer", "-80", 300},
		{"customer", "-40", 500},
		{"customer", "0", 200}, // already recorded
		{"other", "0", 600},
	}
	for _, tc := range cases {
		got, err := c.assignUID(tc.ks, tc.shard)
		if err != nil || got != tc.want {
			t.Fatalf("assignUID(%s/%s) = %d, %v; want %d", tc.ks, tc.shard, got, err, tc.want)
		}
	}
	// A freed uid is reused: customer/0 gets 200 back after a reshard.
	if err := c.forgetTablet(200); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.assignUID("customer", "0"); got != 200 {
		t.Fatalf("customer/0 after forgetting 200 = %d, want 200", got)
	}
	for _, s := range []string{"a", "b", "c"} {
		if _, err := c.assignUID("x", s); err != nil {
			t.Fatalf("uid for x/%s: %v", s, err)
		}
	}
	if _, err := c.assignUID("x", "d"); err == nil {
		t.Fatal("a tenth tablet got a uid; ports would collide")
	}
	recs, err := c.Tablets()
	if err != nil || len(recs) != 9 {
		t.Fatalf("Tablets() = %d records, %v; want 9", len(recs), err)
	}
}

func TestCaughtUp(t *testing.T) {
	mk := func(state, pos string, copying int) *workflowInfo {
		js := `{"name":"w","max_v_replication_lag":"1","workflow_type":"Reshard","shard_streams":{"-80/zone1-0000000300":{"streams":[{"id":"1","shard":"-80","state":"` +
			state + `","position":"` + pos + `","message":"boom","copy_states":[`
		for i := 0; i < copying; i++ {
			if i > 0 {
				js += ","
			}
			js += `{"table":"customer","last_pk":"x"}`
		}
		js += `]}]}}}`
		var w workflowInfo
		if err := json.Unmarshal([]byte(js), &w); err != nil {
			t.Fatal(err)
		}
		return &w
	}
	if ok, _ := mk("Running", "", 0).caughtUp(); ok {
		t.Error("a new stream (Running, no position yet) counted as copied")
	}
	if ok, _ := mk("Copying", "0-1-5", 1).caughtUp(); ok {
		t.Error("a copying stream counted as copied")
	}
	if ok, err := mk("Running", "0-1-5", 0).caughtUp(); !ok {
		t.Errorf("Running with a position and nothing to copy not caught up: %v", err)
	}
	_, err := mk("Error", "0-1-5", 0).caughtUp()
	var f fatalError
	if !errors.As(err, &f) {
		t.Errorf("a stream in Error should stop the wait, got %v", err)
	}
	if w := mk("Running", "0-1-5", 0); w.command() != "Reshard" {
		t.Errorf("command() = %s", w.command())
	}
}

func TestWritesSwitched(t *testing.T) {
	for state, want := range map[string]bool{
		"All Reads Switched. Writes Switched":     true,
		"Reads Not Switched. Writes Not Switched": false,
		"All Reads Switched. Writes Not Switched": false,
		"Reads Not Switched. Writes Switched":     false,
	} {
		if got := writesSwitched(state); got != want {
			t.Errorf("writesSwitched(%q) = %v, want %v", state, got, want)
		}
	}
}

func TestTabletEnum(t *testing.T) {
	var ts []tabletInfo
	if err := json.Unmarshal([]byte(`[{"alias":{"cell":"zone1","uid":100},"type":"PRIMARY"},{"alias":{"cell":"zone1","uid":200},"type":2}]`), &ts); err != nil {
		t.Fatal(err)
	}
	if ts[0].Type != "PRIMARY" || ts[1].Type != "REPLICA" || ts[0].Alias.String() != "zone1-0000000100" {
		t.Fatalf("decoded %+v", ts)
	}
}
