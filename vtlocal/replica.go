package vtlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"vitess.io/vitess/go/mysql/replication"
)

// Replicas and reparents. The cluster normally runs one tablet per shard;
// a test that needs a reparent adds a replica to one shard (AddReplica),
// reparents onto it (PlannedReparent, or KillMySQL + EmergencyReparent),
// and removes the spare tablet afterwards (RemoveTablet), so that the
// layout every other test sees stays one tablet per shard.

// shardTablets returns the recorded tablets of keyspace/shard: its primary
// record first, then the replicas.
func (c *Cluster) shardTablets(keyspace, shard string) (primary TabletRecord, replicas []TabletRecord, err error) {
	recs, err := c.Tablets()
	if err != nil {
		return TabletRecord{}, nil, err
	}
	for _, r := range recs {
		if r.Keyspace != keyspace || r.Shard != shard {
			continue
		}
		if r.Replica {
			replicas = append(replicas, r)
		} else {
			primary = r
		}
	}
	if primary.UID == 0 {
		return TabletRecord{}, nil, fmt.Errorf("no primary tablet recorded for %s/%s", keyspace, shard)
	}
	return primary, replicas, nil
}

// AddReplica starts a replica tablet of keyspace/shard: its own mysqld,
// initialised empty, and a vttablet of type replica, which points it at
// the shard's primary itself (tabletmanager initializeReplication). Its
// mysqld replicates the primary's binlog from the beginning (the cluster
// never purges binlogs, and mysqlctl init writes nothing to the binlog),
// so no backup is needed. Returns once the replica has caught up with the
// primary's position at the time of the call. Its uid is the first free
// one after the primary's (300 → 301).
func (c *Cluster) AddReplica(ctx context.Context, keyspace, shard string) (TabletRecord, error) {
	unlock, err := c.lock()
	if err != nil {
		return TabletRecord{}, err
	}
	defer unlock()
	start := time.Now()
	primary, _, err := c.shardTablets(keyspace, shard)
	if err != nil {
		return TabletRecord{}, err
	}
	recs, err := c.Tablets()
	if err != nil {
		return TabletRecord{}, err
	}
	used := map[int]bool{}
	for _, r := range recs {
		used[r.UID] = true
	}
	uid := 0
	for u := primary.UID + 1; u < primary.UID+100 && u <= maxTabletUID; u++ {
		if !used[u] {
			uid = u
			break
		}
	}
	if uid == 0 {
		return TabletRecord{}, fmt.Errorf("no free tablet uid after %d for a replica of %s/%s", primary.UID, keyspace, shard)
	}
	r := TabletRecord{UID: uid, Keyspace: keyspace, Shard: shard, Replica: true}
	if err := c.saveTablets(append(recs, r)); err != nil {
		return TabletRecord{}, err
	}
	if err := c.ensureRegexpLike(ctx, primary); err != nil {
		return TabletRecord{}, err
	}
	c.log.Info("adding replica", "alias", r.Alias(), "shard", keyspace+"/"+shard, "primary", primary.Alias())
	if err := c.startReplicaTablet(ctx, r, primary); err != nil {
		return TabletRecord{}, err
	}
	if err := c.replicateFrom(ctx, r, primary); err != nil {
		return TabletRecord{}, err
	}
	if err := c.waitReplica(ctx, r); err != nil {
		return TabletRecord{}, err
	}
	if err := c.ensureRegexpLike(ctx, r); err != nil {
		return TabletRecord{}, err
	}
	c.log.Info("replica added", "alias", r.Alias(), "took", since(start))
	return r, nil
}

// startReplicaTablet starts the mysqld and vttablet of replica r of a shard
// whose primary is primary (see withPrimaryHostHidden).
func (c *Cluster) startReplicaTablet(ctx context.Context, r, primary TabletRecord) error {
	if err := c.mkdirOwned(c.tmpDir()); err != nil {
		return err
	}
	if err := c.startMySQL(ctx, r); err != nil {
		return err
	}
	if c.vttabletAlive(r.UID) {
		return nil
	}
	return c.withPrimaryHostHidden(ctx, primary.Alias(), func() error { return c.startVttablet(ctx, r) })
}

// replicateFrom points tablet r's mysqld at primary's and starts
// replication. vttablet would do it itself (at start, in
// initializeReplication, and on every SetReplicationSource of a reparent)
// but cannot on MariaDB: its errant-GTID check parses the primary's
// server_uuid, which MariaDB lacks (the MariaDB flavor reports ""), and
// fails with `invalid MySQL 5.6 SID ""`. vttablet of a replica therefore
// runs with --disable-active-reparents, which skips the step at start, and
// the harness issues the MariaDB statements. current_pos: a fresh mysqld
// has no GTID yet and replicates the primary's binlog from its start; a
// demoted primary continues from what it wrote itself.
func (c *Cluster) replicateFrom(ctx context.Context, r, primary TabletRecord) error {
	stmts := []string{
		"STOP SLAVE",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='localhost', MASTER_PORT=%d, MASTER_USER='vt_repl', MASTER_PASSWORD='', "+
			"MASTER_USE_GTID=current_pos, MASTER_CONNECT_RETRY=1", c.tabletMySQLPort(primary.UID)),
		"START SLAVE",
	}
	for _, q := range stmts {
		if _, err := c.vtctl(ctx, "ExecuteFetchAsDBA", r.Alias(), q); err != nil {
			return fmt.Errorf("replication of %s from %s: %w", r.Alias(), primary.Alias(), err)
		}
	}
	return nil
}

// waitReplica waits until tablet r is a REPLICA in the topology and its
// mysqld has applied everything the shard's primary had when the wait
// began.
func (c *Cluster) waitReplica(ctx context.Context, r TabletRecord) error {
	if err := c.poll(ctx, c.timeout, r.Alias()+" to be a replica", func() (bool, error) {
		t, err := c.tabletByUID(ctx, r.UID)
		if err != nil || t == nil {
			return false, err
		}
		return t.Type == "REPLICA", nil
	}); err != nil {
		return err
	}
	s, err := c.shard(ctx, r.Keyspace, r.Shard)
	if err != nil {
		return err
	}
	if s.Shard.PrimaryAlias == nil {
		return fmt.Errorf("%s/%s has no primary to replicate from", r.Keyspace, r.Shard)
	}
	want, err := c.gtidPos(ctx, s.Shard.PrimaryAlias.String())
	if err != nil {
		return err
	}
	return c.poll(ctx, c.timeout, r.Alias()+" to catch up with "+s.Shard.PrimaryAlias.String()+" at "+want.String(), func() (bool, error) {
		got, err := c.gtidPos(ctx, r.Alias())
		if err != nil {
			return false, err
		}
		return got.AtLeast(want), nil
	})
}

// gtidPos reads a tablet's mysqld's GTID position (applied or written).
func (c *Cluster) gtidPos(ctx context.Context, alias string) (replication.Position, error) {
	raw, err := c.vtctl(ctx, "ExecuteFetchAsDBA", "--json", alias, "select @@global.gtid_current_pos")
	if err != nil {
		return replication.Position{}, err
	}
	var res struct {
		Rows [][]any `json:"rows"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return replication.Position{}, fmt.Errorf("gtid position of %s: %w", alias, err)
	}
	pos := ""
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
		pos, _ = res.Rows[0][0].(string)
	}
	return replication.DecodePosition("MariaDB/" + pos)
}

// PlannedReparent runs PlannedReparentShard of keyspace/shard onto tablet
// newPrimary (0: the shard's first replica) and waits until vtgate serves
// the shard from it. The old primary stays as a replica of the new one.
func (c *Cluster) PlannedReparent(ctx context.Context, keyspace, shard string, newPrimary int) (TabletRecord, error) {
	return c.reparent(ctx, "PlannedReparentShard", keyspace, shard, newPrimary)
}

// EmergencyReparent runs EmergencyReparentShard of keyspace/shard onto
// tablet newPrimary (0: the shard's first replica), for a primary that is
// gone (KillMySQL), and waits until vtgate serves the shard from the new
// primary. The old primary's record is kept, marked as a replica:
// StartTablet brings it back as one, RemoveTablet removes it.
func (c *Cluster) EmergencyReparent(ctx context.Context, keyspace, shard string, newPrimary int) (TabletRecord, error) {
	return c.reparent(ctx, "EmergencyReparentShard", keyspace, shard, newPrimary)
}

func (c *Cluster) reparent(ctx context.Context, how, keyspace, shard string, newPrimary int) (TabletRecord, error) {
	unlock, err := c.lock()
	if err != nil {
		return TabletRecord{}, err
	}
	defer unlock()
	start := time.Now()
	old, replicas, err := c.shardTablets(keyspace, shard)
	if err != nil {
		return TabletRecord{}, err
	}
	var next TabletRecord
	for _, r := range replicas {
		if newPrimary == 0 || r.UID == newPrimary {
			next = r
			break
		}
	}
	if next.UID == 0 {
		return TabletRecord{}, fmt.Errorf("%s/%s has no replica %d to reparent to (AddReplica first)", keyspace, shard, newPrimary)
	}
	c.log.Info(how, "shard", keyspace+"/"+shard, "from", old.Alias(), "to", next.Alias())
	if how == "PlannedReparentShard" {
		err = c.plannedReparent(ctx, old, next)
	} else {
		if next.UID < old.UID {
			return TabletRecord{}, fmt.Errorf("EmergencyReparentShard onto %s cannot work on MariaDB: its uid is below the old primary's %s (see relayLogApplied)", next.Alias(), old.Alias())
		}
		for _, r := range replicas {
			if c.mysqldAlive(r.UID) {
				if err := c.relayLogApplied(ctx, r); err != nil {
					return TabletRecord{}, err
				}
			}
		}
		_, err = c.vtctl(ctx, how, "--new-primary", next.Alias(), "--wait-replicas-timeout", "30s", keyspace+"/"+shard)
	}
	if err != nil {
		return TabletRecord{}, err
	}
	// The records follow the topology: the new primary is the one Up and
	// StartTablet keep primary from now on.
	recs, err := c.Tablets()
	if err != nil {
		return TabletRecord{}, err
	}
	for i := range recs {
		if recs[i].Keyspace == keyspace && recs[i].Shard == shard {
			recs[i].Replica = recs[i].UID != next.UID
		}
	}
	if err := c.saveTablets(recs); err != nil {
		return TabletRecord{}, err
	}
	next.Replica = false
	if err := c.poll(ctx, c.timeout, next.Alias()+" primary of "+keyspace+"/"+shard, func() (bool, error) {
		s, err := c.shard(ctx, keyspace, shard)
		if err != nil {
			return false, err
		}
		t, err := c.tabletByUID(ctx, next.UID)
		if err != nil || t == nil {
			return false, err
		}
		return s.Shard.PrimaryAlias != nil && s.Shard.PrimaryAlias.UID == next.UID && t.Type == "PRIMARY", nil
	}); err != nil {
		return TabletRecord{}, err
	}
	if err := c.waitServing(ctx, next); err != nil {
		return TabletRecord{}, err
	}
	if c.daemonPid(vtgateD) != 0 {
		if err := c.waitVtgate(ctx, c.probes(ctx)); err != nil {
			return TabletRecord{}, err
		}
	}
	c.log.Info(how+" done", "shard", keyspace+"/"+shard, "primary", next.Alias(), "took", since(start))
	return next, nil
}

// KillMySQL kills the tablet's mysqld with SIGKILL, as a crash would, and
// leaves its vttablet running. mysqld_safe, which would restart mysqld, is
// killed first. StartTablet starts mysqld again.
func (c *Cluster) KillMySQL(ctx context.Context, uid int) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := c.record(uid); err != nil {
		return err
	}
	dir := c.tabletDir(uid)
	mysqld := c.mysqldPid(uid)
	if !c.mysqldAlive(uid) {
		return fmt.Errorf("mysqld of tablet %d is not running", uid)
	}
	var safe []int
	for _, pid := range pidsMentioning(dir + "/") {
		if pid != mysqld {
			safe = append(safe, pid)
		}
	}
	for _, pid := range append(safe, mysqld) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	for _, pid := range append(safe, mysqld) {
		if !waitGone(ctx, pid, dir, 10*time.Second) {
			return fmt.Errorf("process %d of tablet %d still there after SIGKILL", pid, uid)
		}
	}
	c.log.Info("mysqld killed", "uid", uid, "pid", mysqld)
	return nil
}

// RemoveTablet stops a tablet that is not its shard's primary (a replica,
// or a primary replaced by EmergencyReparent), deletes it from the
// topology, deletes its data and forgets its uid.
func (c *Cluster) RemoveTablet(ctx context.Context, uid int) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	r, err := c.record(uid)
	if err != nil {
		return err
	}
	if s, err := c.shard(ctx, r.Keyspace, r.Shard); err == nil && s.Shard.PrimaryAlias != nil && s.Shard.PrimaryAlias.UID == uid {
		return fmt.Errorf("tablet %d is the primary of %s/%s: reparent first", uid, r.Keyspace, r.Shard)
	}
	c.log.Info("removing tablet", "alias", r.Alias(), "shard", r.Keyspace+"/"+r.Shard)
	if err := c.stopTabletProcs(ctx, uid); err != nil {
		return err
	}
	if t, _ := c.tabletByUID(ctx, uid); t != nil {
		if _, err := c.vtctl(ctx, "DeleteTablets", r.Alias()); err != nil && !isNotFound(err) {
			return err
		}
	}
	if err := os.RemoveAll(c.tabletDir(uid)); err != nil {
		return err
	}
	return c.forgetTablet(uid)
}

// ParseTablet reads a tablet given as a uid ("301") or an alias
// ("zone1-0000000301").
func ParseTablet(s string) (int, error) {
	t := strings.TrimPrefix(s, Cell+"-")
	var uid int
	if _, err := fmt.Sscanf(t, "%d", &uid); err != nil || uid <= 0 || fmt.Sprint(uid) != strings.TrimLeft(t, "0") {
		return 0, fmt.Errorf("%q is neither a tablet uid nor an alias %s-<uid>", s, Cell)
	}
	return uid, nil
}

// relayLogApplied waits until replica r has applied everything its IO
// thread received (gtid_slave_pos at or after Gtid_IO_Pos).
//
// EmergencyReparentShard waits for that itself, but on MariaDB the wait
// is broken: MariaDB reports no relay-log GTID position, so ERS waits for
// the file position of the old primary's binlog it received
// ("vt-0000000300-bin.000002:19279"); vttablet first compares that with
// the candidate's own binlog file position, and when the candidate's file
// name sorts after it (a higher uid) takes it as reached without waiting,
// otherwise passes it to MASTER_GTID_WAIT, which fails ("Could not parse
// GTID list", error 1941). So ERS works only onto a tablet with a higher
// uid than the old primary, and without waiting: the harness waits here,
// once the old primary is dead and nothing more arrives.
func (c *Cluster) relayLogApplied(ctx context.Context, r TabletRecord) error {
	return c.poll(ctx, 30*time.Second, r.Alias()+" to apply its relay log", func() (bool, error) {
		raw, err := c.vtctl(ctx, "ExecuteFetchAsDBA", "--json", r.Alias(), "SHOW SLAVE STATUS")
		if err != nil {
			return false, err
		}
		var res struct {
			Fields []struct{ Name string } `json:"fields"`
			Rows   [][]any                 `json:"rows"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return false, err
		}
		if len(res.Rows) == 0 {
			return true, nil // not replicating
		}
		io := ""
		for i, f := range res.Fields {
			if f.Name == "Gtid_IO_Pos" && i < len(res.Rows[0]) {
				io, _ = res.Rows[0][i].(string)
			}
		}
		want, err := replication.DecodePosition("MariaDB/" + io)
		if err != nil {
			return false, err
		}
		got, err := c.gtidPos(ctx, r.Alias())
		if err != nil {
			return false, err
		}
		return got.AtLeast(want), nil
	})
}
