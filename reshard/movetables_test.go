package reshard

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// Rows of _vt.resharding_journal captured on the local cluster
// (vtctldclient ExecuteFetchAsDBA): the MoveTables of customer and corder
// from commerce to customer (on the commerce primary), and back (on the
// customer primary). No migration_type printed means TABLES.
var (
	journalCommerceToCustomer = `id:6740760173349126720 tables:"corder" tables:"customer" local_position:"MariaDB/0-485004893-32" shard_gtids:{keyspace:"customer" shard:"0" gtid:"MariaDB/0-917673279-47"} participants:{keyspace:"commerce" shard:"0"}`
	journalCustomerToCommerce = `id:7619041373535441001 tables:"corder" tables:"customer" local_position:"MariaDB/0-917673279-60" shard_gtids:{keyspace:"commerce" shard:"0" gtid:"MariaDB/0-485004893-79"} participants:{keyspace:"customer" shard:"0"}`
	journalReshard            = `id:1 migration_type:SHARDS tables:"/.*" local_position:"MariaDB/0-1-68" shard_gtids:{keyspace:"customer" shard:"-80" gtid:"MariaDB/0-2-58"} shard_gtids:{keyspace:"customer" shard:"80-" gtid:"MariaDB/0-3-59"} participants:{keyspace:"customer" shard:"0"}`
)

func TestFromTablesJournal(t *testing.T) {
	raw, err := DecodeJournal([]byte(journalCustomerToCommerce))
	if err != nil {
		t.Fatal(err)
	}
	j, ok := FromTablesJournal("customer", "0", raw)
	if !ok {
		t.Fatal("a MoveTables journal was not recognised")
	}
	if !j.Moves() || j.Keyspace != "customer" || j.Target() != "commerce" || !j.Complete() {
		t.Fatalf("journal %+v", j)
	}
	if got := j.Tables; len(got) != 2 || got[0] != "corder" || got[1] != "customer" {
		t.Errorf("tables %v", got)
	}
	if j.Local["0"] != "MariaDB/0-917673279-60" {
		t.Errorf("local position %v", j.Local)
	}
	// Crossing the cutover puts the reader on the target keyspace.
	at := position.New(position.Shard{Keyspace: "customer", Shard: "0", GTID: "MariaDB/0-917673279-60"})
	want := position.New(position.Shard{Keyspace: "commerce", Shard: "0", GTID: "MariaDB/0-485004893-79"})
	if got := j.Apply(at); !got.Identical(want) {
		t.Errorf("apply: %v, want %v", got, want)
	}

	// The journal of the opposite move has another key, though the
	// tables are the same.
	raw2, err := DecodeJournal([]byte(journalCommerceToCustomer))
	if err != nil {
		t.Fatal(err)
	}
	j2, ok := FromTablesJournal("commerce", "0", raw2)
	if !ok || j2.Key == j.Key || j2.Target() != "customer" {
		t.Fatalf("reverse journal %+v", j2)
	}
	// Read on the wrong keyspace's primary, it is not ours.
	if _, ok := FromTablesJournal("customer", "0", raw2); ok {
		t.Error("a journal whose participants are in another keyspace was taken")
	}
	// Reshard journals are not MoveTables journals, and vice versa.
	rs, err := DecodeJournal([]byte(journalReshard))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := FromTablesJournal("customer", "0", rs); ok {
		t.Error("a reshard journal was taken for a MoveTables one")
	}
	if _, ok := FromEvent("customer", "0", raw); ok {
		t.Error("a MoveTables journal was taken for a reshard one")
	}
	if _, err := DecodeJournal([]byte("id:")); err == nil {
		t.Error("a broken journal decoded")
	}
}
