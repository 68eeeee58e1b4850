package reshard

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// MoveTables cutovers (DESIGN §4.1). vtgate does not send the JOURNAL of a
// MoveTables switch to a VStream on the source keyspace (it forwards only
// SHARDS journals), so the gateway reads the journal where Vitess writes
// it: the `_vt.resharding_journal` table of each source primary, whose
// `val` column is a binlogdata.Journal in protobuf text form.

// DecodeJournal parses the `val` column of a `_vt.resharding_journal` row.
func DecodeJournal(val []byte) (*binlogdatapb.Journal, error) {
	j := &binlogdatapb.Journal{}
	if err := prototext.Unmarshal(val, j); err != nil {
		return nil, fmt.Errorf("decode resharding journal: %w", err)
	}
	return j, nil
}

// FromTablesJournal converts a MoveTables journal read on the primary of
// participant shard of keyspace (the source) into a one-participant view,
// as FromEvent does for reshards. ok is false for anything else: a
// reshard journal, a journal of another keyspace's workflow, one whose
// targets are in the same keyspace or in several.
func FromTablesJournal(keyspace, shard string, j *binlogdatapb.Journal) (rec *Journal, ok bool) {
	if j == nil || j.MigrationType != binlogdatapb.MigrationType_TABLES || len(j.ShardGtids) == 0 {
		return nil, false
	}
	target := j.ShardGtids[0].Keyspace
	for _, sg := range j.ShardGtids {
		if sg.Keyspace != target {
			return nil, false
		}
	}
	if target == "" || target == keyspace {
		return nil, false
	}
	rec = &Journal{Keyspace: keyspace, ID: j.Id, Local: map[string]string{}, Kind: KindTables, TargetKeyspace: target,
		Tables: append([]string(nil), j.Tables...), SeenAt: time.Now().UTC()}
	sort.Strings(rec.Tables)
	for _, p := range j.Participants {
		if p.Keyspace == keyspace {
			rec.Participants = append(rec.Participants, p.Shard)
		}
	}
	if len(rec.Participants) == 0 {
		return nil, false
	}
	sort.Strings(rec.Participants)
	for _, sg := range j.ShardGtids {
		rec.Targets = append(rec.Targets, ShardPos{Shard: sg.Shard, Gtid: sg.Gtid})
	}
	sort.Slice(rec.Targets, func(a, b int) bool { return rec.Targets[a].Shard < rec.Targets[b].Shard })
	// The id is a hash of the target keyspace and its streams and comes
	// back when the same tables move again; the key also covers the
	// target and the tables.
	rec.Key = journalKey(keyspace+">"+target+":"+strings.Join(rec.Tables, ","), j.Id, rec.Participants, rec.Targets)
	rec.Local[shard] = j.LocalPosition
	return rec, true
}
