package vtlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TabletRecord says which shard a tablet uid serves. The record of all
// tablets lives in the data root (tablets.json) because the topology loses
// a tablet once its shard is deleted, while its processes and data
// directory still have to be found and stopped.
type TabletRecord struct {
	UID      int    `json:"uid"`
	Keyspace string `json:"keyspace"`
	Shard    string `json:"shard"`
	// Replica marks a tablet that is not meant to be its shard's primary:
	// one added by AddReplica, or a primary demoted by a reparent. Up,
	// AddShards and StartTablet make the shard's other tablet primary;
	// a reparent swaps the marks.
	Replica bool `json:"replica,omitempty"`
}

// Alias is the tablet's topology alias.
func (r TabletRecord) Alias() string { return TabletAlias(r.UID) }

// preferredUIDs keeps the uids of the Vitess examples for the shards the
// examples use, so logs and docs from examples/local read the same here.
var preferredUIDs = map[string]int{
	"commerce/0":   100,
	"customer/0":   200,
	"customer/-80": 300,
	"customer/80-": 400,
}

func (c *Cluster) recordPath() string { return filepath.Join(c.dataRoot, "tablets.json") }

// Tablets returns the recorded tablets, ordered by uid.
func (c *Cluster) Tablets() ([]TabletRecord, error) {
	b, err := os.ReadFile(c.recordPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []TabletRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("%s: %w", c.recordPath(), err)
	}
	slices.SortFunc(recs, func(a, b TabletRecord) int { return a.UID - b.UID })
	return recs, nil
}

func (c *Cluster) saveTablets(recs []TabletRecord) error {
	slices.SortFunc(recs, func(a, b TabletRecord) int { return a.UID - b.UID })
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	return c.writeOwned(c.recordPath(), append(b, '\n'))
}

// assignUID returns the uid recorded for keyspace/shard, or records a new
// one: the example's uid when it is free, otherwise the first free
// multiple of 100 from 500 on.
func (c *Cluster) assignUID(keyspace, shard string) (int, error) {
	recs, err := c.Tablets()
	if err != nil {
		return 0, err
	}
	used := map[int]bool{}
	for _, r := range recs {
		if r.Keyspace == keyspace && r.Shard == shard && !r.Replica {
			return r.UID, nil
		}
		used[r.UID] = true
	}
	uid := 0
	if p, ok := preferredUIDs[keyspace+"/"+shard]; ok && !used[p] {
		uid = p
	}
	candidates := []int{500, 600, 700, 800, 900, 100, 200, 300, 400}
	for _, u := range candidates {
		if uid != 0 {
			break
		}
		if !used[u] {
			uid = u
		}
	}
	if uid == 0 {
		return 0, fmt.Errorf("no free tablet uid (at most 9 tablets, uids 100..%d)", maxTabletUID)
	}
	recs = append(recs, TabletRecord{UID: uid, Keyspace: keyspace, Shard: shard})
	return uid, c.saveTablets(recs)
}

func (c *Cluster) record(uid int) (TabletRecord, error) {
	recs, err := c.Tablets()
	if err != nil {
		return TabletRecord{}, err
	}
	for _, r := range recs {
		if r.UID == uid {
			return r, nil
		}
	}
	return TabletRecord{}, fmt.Errorf("no tablet with uid %d in %s", uid, c.recordPath())
}

func (c *Cluster) forgetTablet(uid int) error {
	recs, err := c.Tablets()
	if err != nil {
		return err
	}
	recs = slices.DeleteFunc(recs, func(r TabletRecord) bool { return r.UID == uid })
	return c.saveTablets(recs)
}

func (c *Cluster) vttabletPidFile(uid int) string {
	return filepath.Join(c.tabletDir(uid), "vttablet.pid")
}

// mysqldPid is the pid of the tablet's mysqld (mariadbd), from the pid file
// mysqld itself writes into the tablet directory.
func (c *Cluster) mysqldPid(uid int) int {
	return readPid(filepath.Join(c.tabletDir(uid), "mysql.pid"))
}

func (c *Cluster) mysqldAlive(uid int) bool {
	return pidAlive(c.mysqldPid(uid), c.tabletDir(uid))
}

func (c *Cluster) vttabletAlive(uid int) bool {
	return pidAlive(readPid(c.vttabletPidFile(uid)), "vttablet")
}

// startMySQL initialises (first time) or starts the tablet's mysqld.
func (c *Cluster) startMySQL(ctx context.Context, r TabletRecord) error {
	if c.mysqldAlive(r.UID) {
		return nil
	}
	dir := c.tabletDir(r.UID)
	// A mysqld_safe or mariadbd of this tablet without a live pid file (a
	// run killed half-way) would hold the port and the data directory.
	for _, pid := range pidsMentioning(dir + "/") {
		c.log.Warn("stopping a leftover mysqld process of this tablet", "uid", r.UID, "pid", pid)
		_ = stopPid(ctx, pid, dir, 10*time.Second)
	}
	logPath := c.logFile(fmt.Sprintf("mysqlctl_%d", r.UID))
	common := []string{"--config-file-not-found-handling=ignore", "--log-format", "text",
		"--tablet-uid", strconv.Itoa(r.UID), "--mysql-port", strconv.Itoa(c.tabletMySQLPort(r.UID))}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		c.log.Info("starting mysqld", "uid", r.UID, "port", c.tabletMySQLPort(r.UID))
		return c.runLogged(ctx, logPath, filepath.Join(c.binDir, "mysqlctl"), append(common, "start")...)
	}
	c.log.Info("initialising mysqld", "uid", r.UID, "port", c.tabletMySQLPort(r.UID))
	err := c.runLogged(ctx, logPath, filepath.Join(c.binDir, "mysqlctl"),
		append(common, "init", "--init-db-sql-file", c.initDBPath())...)
	if err != nil {
		// A failed init leaves mysqld_safe/mariadbd running and
		// `mysqlctl shutdown` cannot stop them; stop them by pid and
		// remove the half-made directory so that a retry starts clean.
		for _, pid := range pidsMentioning(dir) {
			_ = stopPid(ctx, pid, dir, 10*time.Second)
		}
		_ = os.RemoveAll(dir)
		return fmt.Errorf("mysqlctl init for tablet %d: %w", r.UID, err)
	}
	return nil
}

// startVttablet starts the tablet's vttablet (if not running) and waits
// until it answers on its web port and is registered in the topology.
func (c *Cluster) startVttablet(ctx context.Context, r TabletRecord) error {
	if c.reclaim(ctx, "vttablet", "\x00--tablet-path\x00"+r.Alias()+"\x00", c.vttabletPidFile(r.UID)) == 0 {
		c.log.Info("starting vttablet", "alias", r.Alias(), "keyspace", r.Keyspace, "shard", r.Shard, "port", c.tabletWebPort(r.UID))
		args := append(c.TopoFlags(),
			"--config-file-not-found-handling=ignore",
			"--log-format", "text",
			"--tablet-path", r.Alias(),
			"--tablet-hostname", "localhost",
			"--init-keyspace", r.Keyspace,
			"--init-shard", r.Shard,
			"--init-tablet-type", "replica",
			"--health-check-interval", "2s",
			"--port", strconv.Itoa(c.tabletWebPort(r.UID)),
			"--grpc-port", strconv.Itoa(c.tabletGRPCPort(r.UID)),
			"--service-map", "grpc-queryservice,grpc-tabletmanager,grpc-updatestream",
			"--heartbeat-on-demand-duration", "5s",
			// Small pools: the defaults (16/200/20 plus app/dba pools) are
			// sized for production and cost memory on every tablet.
			"--queryserver-config-pool-size", "8",
			"--queryserver-config-stream-pool-size", "8",
			"--queryserver-config-transaction-cap", "16",
			"--app-pool-size", "8",
			"--dba-pool-size", "4",
		)
		if _, err := c.startDaemon(ctx, filepath.Join(c.binDir, "vttablet"),
			filepath.Join(c.tabletDir(r.UID), "vttablet.log"), c.vttabletPidFile(r.UID), args...); err != nil {
			return err
		}
	}
	url := fmt.Sprintf("http://localhost:%d/debug/status", c.tabletWebPort(r.UID))
	if err := c.waitHTTP(ctx, "vttablet "+r.Alias(), url, func() error {
		if !c.vttabletAlive(r.UID) {
			return errors.New("vttablet exited")
		}
		return nil
	}, filepath.Join(c.tabletDir(r.UID), "vttablet.log")); err != nil {
		return err
	}
	return c.poll(ctx, c.timeout, "tablet "+r.Alias()+" in the topology", func() (bool, error) {
		t, err := c.tabletByUID(ctx, r.UID)
		return t != nil, err
	})
}

// startTablet brings up mysqld and vttablet for a recorded tablet.
func (c *Cluster) startTablet(ctx context.Context, r TabletRecord) error {
	if err := c.mkdirOwned(c.tmpDir()); err != nil {
		return err
	}
	if err := c.startMySQL(ctx, r); err != nil {
		return err
	}
	return c.startVttablet(ctx, r)
}

// startTablets starts several tablets in parallel: mysqld initialisation
// dominates and is independent per tablet.
func (c *Cluster) startTablets(ctx context.Context, recs []TabletRecord) error {
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startTablet(ctx, r)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ensurePrimary makes tablet r the primary of its shard (unless it already
// is) and waits until the topology says so.
func (c *Cluster) ensurePrimary(ctx context.Context, r TabletRecord) error {
	isPrimary := func() (bool, error) {
		s, err := c.shard(ctx, r.Keyspace, r.Shard)
		if err != nil {
			return false, err
		}
		if s.Shard.PrimaryAlias == nil || s.Shard.PrimaryAlias.UID != r.UID {
			return false, nil
		}
		t, err := c.tabletByUID(ctx, r.UID)
		if err != nil || t == nil {
			return false, err
		}
		return t.Type == "PRIMARY", nil
	}
	if ok, err := isPrimary(); err == nil && ok {
		return c.setWritable(ctx, r)
	}
	s, err := c.shard(ctx, r.Keyspace, r.Shard)
	if err != nil {
		return err
	}
	if s.Shard.PrimaryAlias != nil && s.Shard.PrimaryAlias.UID == r.UID {
		// A restarted primary promotes itself from the shard record; give
		// it the chance instead of reparenting to itself.
		if err := c.poll(ctx, 30*time.Second, r.Alias()+" to resume as primary", isPrimary); err == nil {
			return c.setWritable(ctx, r)
		}
	}
	c.log.Info("PlannedReparentShard", "shard", r.Keyspace+"/"+r.Shard, "primary", r.Alias())
	if _, err := c.vtctl(ctx, "PlannedReparentShard", "--new-primary", r.Alias(), r.Keyspace+"/"+r.Shard); err != nil {
		return err
	}
	return c.poll(ctx, c.timeout, r.Alias()+" primary of "+r.Keyspace+"/"+r.Shard, isPrimary)
}

// setWritable clears read_only on a primary's mysqld. A restarted primary
// on MariaDB needs it: mysqld starts read-only (mysqlctl's mariadb10.cnf),
// and vttablet, resuming as primary, first re-applies its sidecar schema
// (it always sees a difference on MariaDB), which fails under read_only, so
// the tablet stays NOT_SERVING for good. Neither Vitess remedy works on
// MariaDB: SetWritable reads @@super_read_only and a reparent's
// DemotePrimary calls regexp_like(), so read_only is cleared with plain SQL.
// On a healthy primary this is a no-op.
func (c *Cluster) setWritable(ctx context.Context, r TabletRecord) error {
	_, err := c.vtctl(ctx, "ExecuteFetchAsDBA", r.Alias(), "SET GLOBAL read_only = OFF")
	return err
}

// waitServing waits until the tablet's query service answers a query
// (its /debug/health runs "select 1"), which holds for primaries of
// serving shards only.
func (c *Cluster) waitServing(ctx context.Context, r TabletRecord) error {
	url := fmt.Sprintf("http://localhost:%d/debug/health", c.tabletWebPort(r.UID))
	return c.poll(ctx, c.timeout, r.Alias()+" serving queries", func() (bool, error) {
		code, body, err := httpGet(ctx, url)
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("/debug/health: %d %s", code, strings.TrimSpace(body))
		}
		return true, nil
	})
}

// waitVReplicationOpen waits until every primary of the keyspace answers
// workflow queries, i.e. its VReplication engine is open. Creating a
// workflow on a tablet whose engine is still closed fails.
func (c *Cluster) waitVReplicationOpen(ctx context.Context, keyspace string) error {
	return c.poll(ctx, c.timeout, "VReplication engines of "+keyspace, func() (bool, error) {
		_, err := c.vtctl(ctx, "Workflow", "--keyspace", keyspace, "list")
		return err == nil, err
	})
}

// stopTabletProcs stops a tablet's vttablet and then its mysqld.
func (c *Cluster) stopTabletProcs(ctx context.Context, uid int) error {
	var errs []error
	if pid := readPid(c.vttabletPidFile(uid)); pidAlive(pid, "vttablet") {
		c.log.Info("stopping vttablet", "alias", TabletAlias(uid), "pid", pid)
		errs = append(errs, stopPid(ctx, pid, "vttablet", 30*time.Second))
	}
	if c.mysqldAlive(uid) {
		c.log.Info("stopping mysqld", "uid", uid, "pid", c.mysqldPid(uid))
		err := c.runLogged(ctx, c.logFile(fmt.Sprintf("mysqlctl_%d", uid)), filepath.Join(c.binDir, "mysqlctl"),
			"--config-file-not-found-handling=ignore", "--log-format", "text",
			"--tablet-uid", strconv.Itoa(uid), "shutdown")
		if err != nil {
			c.log.Warn("mysqlctl shutdown failed; stopping mysqld by pid", "uid", uid, "err", err)
		}
		// mysqld_safe restarts a killed mysqld, so stop it first.
		for _, pid := range pidsMentioning(c.tabletDir(uid)) {
			errs = append(errs, stopPid(ctx, pid, c.tabletDir(uid), 30*time.Second))
		}
	}
	return errors.Join(errs...)
}

// StopTablet stops the vttablet and mysqld of tablet uid. Its topology
// record stays, so the shard keeps a (now unreachable) primary: this is how
// tests simulate a lost tablet.
func (c *Cluster) StopTablet(ctx context.Context, uid int) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := c.record(uid); err != nil {
		return err
	}
	return c.stopTabletProcs(ctx, uid)
}

// StartTablet starts a tablet stopped with StopTablet and waits until it is
// the primary of its shard again (and serving, if its shard serves); a
// replica (AddReplica, or a primary replaced by a reparent) until it
// replicates from the shard's primary again.
func (c *Cluster) StartTablet(ctx context.Context, uid int) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	r, err := c.record(uid)
	if err != nil {
		return err
	}
	if r.Replica {
		primary, _, err := c.shardTablets(r.Keyspace, r.Shard)
		if err != nil {
			return err
		}
		if err := c.startReplicaTablet(ctx, r, primary); err != nil {
			return err
		}
		if err := c.replicateFrom(ctx, r, primary); err != nil {
			return err
		}
		return c.waitReplica(ctx, r)
	}
	if err := c.startTablet(ctx, r); err != nil {
		return err
	}
	if err := c.ensurePrimary(ctx, r); err != nil {
		return err
	}
	s, err := c.shard(ctx, r.Keyspace, r.Shard)
	if err != nil {
		return err
	}
	if s.Shard.IsPrimaryServing {
		return c.waitServing(ctx, r)
	}
	return nil
}

// FlushBinaryLogs starts a new binlog file on every tablet of keyspace.
// The rotation also wakes binlog dump threads whose VStream has gone (they
// linger until their next write, and a new VStream reusing their replica
// server id waits for MariaDB to kill them): benchmarks rotate before each
// run so that every contender starts alike.
func (c *Cluster) FlushBinaryLogs(ctx context.Context, keyspace string) error {
	recs, err := c.Tablets()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Keyspace != keyspace {
			continue
		}
		if _, err := c.vtctl(ctx, "ExecuteFetchAsDBA", r.Alias(), "FLUSH BINARY LOGS"); err != nil {
			return fmt.Errorf("flush binary logs on %s: %w", r.Alias(), err)
		}
	}
	return nil
}
