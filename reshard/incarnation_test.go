package reshard

import (
	"context"
	"strings"
	"testing"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// A MoveTables journal into a keyspace whose shard name was retired
// starts its readers on the name's later incarnation.
func TestMoveIntoAReusedNameStampsItsTargets(t *testing.T) {
	ctx := context.Background()
	_, reg, _ := resumeSetup(t)
	split, _ := FromEvent("customer", "0", &binlogdatapb.Journal{Id: 7, MigrationType: binlogdatapb.MigrationType_SHARDS,
		LocalPosition: pos(100), Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: "customer", Shard: "0"}},
		ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: "-80", Gtid: pos(5)}, {Keyspace: "customer", Shard: "80-", Gtid: pos(6)}}})
	if _, err := reg.Record(ctx, split); err != nil {
		t.Fatal(err)
	}
	home, ok := FromTablesJournal("commerce", "0", &binlogdatapb.Journal{Id: 9, MigrationType: binlogdatapb.MigrationType_TABLES,
		Tables: []string{"t"}, LocalPosition: pos(40), Participants: []*binlogdatapb.KeyspaceShard{{Keyspace: "commerce", Shard: "0"}},
		ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "customer", Shard: "0", Gtid: pos(3)}}})
	if !ok {
		t.Fatal("not a MoveTables journal")
	}
	if _, err := reg.Record(ctx, home); err != nil {
		t.Fatal(err)
	}
	list, err := reg.ListWithTargets(ctx, "commerce")
	if err != nil || len(list) != 1 {
		t.Fatalf("%v %v", list, err)
	}
	got := list[0].StampedTargets()["0"]
	if want := pos(3) + position.IncarnationSep + split.Key; got != want {
		t.Fatalf("target %q, want %q", got, want)
	}
	if s, _ := list[0].Apply(position.New()).Lookup("customer", "0"); !strings.HasSuffix(s.Text(), split.Key) {
		t.Fatalf("Apply: %+v", s)
	}
}
