package upstream

import "testing"

// Only a DROP (or a RENAME away, as online DDL does) of the stream's own
// tables ends it.
func TestDroppedTables(t *testing.T) {
	if got := droppedTables("drop table `corder`", []string{"customer"}); len(got) != 0 {
		t.Fatalf("a DROP of another table counted: %v", got)
	}
	if got := droppedTables("drop table if exists `customer`, `corder`", []string{"customer"}); len(got) != 1 || got[0] != "customer" {
		t.Fatalf("a DROP of the stream's table: %v", got)
	}
	if got := droppedTables("RENAME TABLE customer TO _vt_hld_1, corder TO _vt_hld_2", []string{"corder", "customer"}); len(got) != 2 {
		t.Fatalf("renamed away: %v", got)
	}
}
