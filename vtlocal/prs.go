package vtlocal

import (
	"context"
	"fmt"
	"time"

	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	"vitess.io/vitess/go/vt/vttablet/grpctmclient"
)

// plannedReparent is PlannedReparentShard's graceful promotion
// (vtctl/reparentutil/planned_reparenter.go), step by step with the same
// tablet manager RPCs, minus the one step that cannot work on MariaDB.
//
// vtctldclient PlannedReparentShard first re-points the primary-elect at
// the current primary with SetReplicationSource, "to make sure the replica
// knows who the current primary is", and that RPC's errant-GTID check
// parses the primary's server_uuid, which the MariaDB flavor reports as ""
// (`invalid MySQL 5.6 SID ""`): PRS fails before doing anything. The
// replica already replicates from the primary (replicateFrom), so that
// step is skipped, and the demoted primary is pointed at the new one with
// MariaDB statements instead of SetReplicationSource. Everything a client
// sees is Vitess's own: DemotePrimary stops the old primary's query
// service (vtgate buffers writes), PromoteReplica makes the new one
// primary, which updates the shard record itself.
func (c *Cluster) plannedReparent(ctx context.Context, old, next TabletRecord) error {
	tmc := grpctmclient.NewClient()
	defer tmc.Close()
	oldT, err := c.tabletProto(ctx, old.Alias())
	if err != nil {
		return err
	}
	nextT, err := c.tabletProto(ctx, next.Alias())
	if err != nil {
		return err
	}
	if nextT.Type != topodatapb.TabletType_REPLICA {
		return fmt.Errorf("%s is %v, not a replica", next.Alias(), nextT.Type)
	}
	wait := func(pos string) error {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := tmc.WaitForPosition(wctx, nextT, pos); err != nil {
			return fmt.Errorf("%s did not reach %s: %w", next.Alias(), pos, err)
		}
		return nil
	}
	// Catch up while the primary still takes writes, so that the time
	// without a primary is short.
	snapshot, err := tmc.PrimaryPosition(ctx, oldT)
	if err != nil {
		return err
	}
	if err := wait(snapshot); err != nil {
		return err
	}
	status, err := tmc.DemotePrimary(ctx, oldT, false)
	if err != nil {
		return fmt.Errorf("DemotePrimary %s: %w", old.Alias(), err)
	}
	if err := wait(status.Position); err != nil {
		if uerr := tmc.UndoDemotePrimary(context.WithoutCancel(ctx), oldT, false); uerr != nil {
			return fmt.Errorf("%w; UndoDemotePrimary %s: %v", err, old.Alias(), uerr)
		}
		return err
	}
	pos, err := tmc.PromoteReplica(ctx, nextT, false)
	if err != nil {
		return fmt.Errorf("PromoteReplica %s: %w", next.Alias(), err)
	}
	if err := tmc.PopulateReparentJournal(ctx, nextT, time.Now().UnixNano(), "PlannedReparentShard", nextT.Alias, pos); err != nil {
		return fmt.Errorf("PopulateReparentJournal %s: %w", next.Alias(), err)
	}
	if err := c.replicateFrom(ctx, old, next); err != nil {
		return err
	}
	// SetReplicationSource would have made the old primary a replica.
	return tmc.ChangeType(ctx, oldT, topodatapb.TabletType_REPLICA, false)
}
