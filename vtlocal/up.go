package vtlocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Up brings the cluster from nothing (or from any partial state) to the
// example's state after step 301: commerce/0 with product and the
// customer_seq/order_seq sequences; customer/0 holding customer and corder
// (moved there by a completed MoveTables) under the sharded xxhash vschema
// with auto-increment from the sequences; vtgate serving both keyspaces.
// Every step checks the real state first, so Up on a healthy cluster only
// performs checks and returns in about a second.
//
// Up does not install packages or build binaries: see EnsurePackages and
// EnsureBinaries.
func (c *Cluster) Up(ctx context.Context) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	if err := c.checkBinaries(); err != nil {
		return err
	}
	if err := c.prepareDataRoot(ctx); err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startVtctld(ctx); err != nil {
		return err
	}
	m, err := c.vitess(ctx)
	if err != nil {
		return err
	}
	example := func(name string) string { return filepath.Join(m.Dir, "examples", "local", name) }

	// Every shard's tablet starts together: mysqld initialisation
	// (mysql_install_db) dominates Up and is independent per tablet.
	want, err := c.wantedShards(ctx)
	if err != nil {
		return err
	}
	tablets, err := c.ensureShardPrimaries(ctx, want)
	if err != nil {
		return err
	}
	commerce := tablets[0]

	if err := c.applyCommerceSchema(ctx, example); err != nil {
		return err
	}
	if err := c.waitServing(ctx, commerce); err != nil {
		return err
	}
	// vtgate warms up (discovers tablets) while the tables are moved.
	if err := c.startVtgate(ctx); err != nil {
		return err
	}

	// customer/0 and the MoveTables of customer and corder into it
	// (steps 201-205), then sequences and the sharded vschema (301).
	if err := c.waitServingPrimaries(ctx, tablets[1:]); err != nil {
		return err
	}
	if err := c.moveCustomerTables(ctx); err != nil {
		return err
	}
	if err := c.shardCustomerVSchema(ctx, example); err != nil {
		return err
	}
	if err := c.waitVtgate(ctx, []string{"select count(*) from commerce.product", "select count(*) from customer.customer", "select count(*) from customer.corder"}); err != nil {
		return err
	}
	c.log.Info("cluster up", "took", since(start), "mysql", c.MySQLAddr(), "vtgate_grpc", c.VtgateAddr(), "vtctld", c.VtctldAddr())
	return nil
}

// checkBinaries fails unless every Vitess binary Up runs is installed.
func (c *Cluster) checkBinaries() error {
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(c.binDir, b)); err != nil {
			return fmt.Errorf("vitess binary %s missing in %s: run EnsureBinaries (vtlocal binaries)", b, c.binDir)
		}
	}
	return nil
}

// prepareDataRoot readies what the daemons need before any starts: the
// run user, the reserved ports, the data root's directories and config.
func (c *Cluster) prepareDataRoot(ctx context.Context) error {
	if _, err := c.account(ctx); err != nil {
		return err
	}
	c.reservePorts()
	if err := c.mkdirOwned(c.tmpDir()); err != nil {
		return err
	}
	if err := c.mkdirOwned(filepath.Join(c.dataRoot, "backups")); err != nil {
		return err
	}
	return c.writeConfig(ctx)
}

// wantedShards lists the (keyspace, shard) pairs that get a tablet,
// commerce's first. A keyspace that exists keeps its shards (Up after a
// reshard, or after a reboot killed the processes); a new one gets shard 0.
func (c *Cluster) wantedShards(ctx context.Context) ([][2]string, error) {
	var want [][2]string
	for _, ks := range []string{"commerce", "customer"} {
		shards, err := c.shards(ctx, ks)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if len(shards) == 0 {
			shards = []string{"0"}
		}
		for _, sh := range shards {
			want = append(want, [2]string{ks, sh})
		}
	}
	return want, nil
}

// applyCommerceSchema applies the example schema and vschema of commerce
// (step 101) unless its product table is there.
func (c *Cluster) applyCommerceSchema(ctx context.Context, example func(string) string) error {
	vs, err := c.getVSchema(ctx, "commerce")
	if err != nil {
		return err
	}
	if _, ok := vs.Tables["product"]; ok {
		return nil
	}
	c.log.Info("applying commerce schema and vschema")
	if _, err := c.vtctl(ctx, "ApplySchema", "--sql-file", example("create_commerce_schema.sql"), "commerce"); err != nil {
		return err
	}
	_, err = c.vtctl(ctx, "ApplyVSchema", "--vschema-file", example("vschema_commerce_initial.json"), "commerce")
	return err
}

// waitServingPrimaries waits for the tablets of the shards whose primary
// is serving to answer queries.
func (c *Cluster) waitServingPrimaries(ctx context.Context, tablets []TabletRecord) error {
	for _, r := range tablets {
		s, err := c.shard(ctx, r.Keyspace, r.Shard)
		if err != nil {
			return err
		}
		if s.Shard.IsPrimaryServing {
			if err := c.waitServing(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensureShardPrimaries creates the keyspaces if needed (durability none:
// one tablet per shard, no semi-sync acks to wait for), starts one tablet
// per shard in parallel and makes each the primary of its shard.
func (c *Cluster) ensureShardPrimaries(ctx context.Context, shards [][2]string) ([]TabletRecord, error) {
	recs := make([]TabletRecord, len(shards))
	for i, ks := range shards {
		keyspace, shard := ks[0], ks[1]
		if _, err := c.vtctl(ctx, "GetKeyspace", keyspace); err != nil {
			if !isNotFound(err) {
				return nil, err
			}
			c.log.Info("creating keyspace", "keyspace", keyspace)
			if _, err := c.vtctl(ctx, "CreateKeyspace", "--durability-policy=none", keyspace); err != nil {
				return nil, err
			}
		}
		uid, err := c.assignUID(keyspace, shard)
		if err != nil {
			return nil, err
		}
		recs[i] = TabletRecord{UID: uid, Keyspace: keyspace, Shard: shard}
	}
	if err := c.startTablets(ctx, recs); err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := c.ensurePrimary(ctx, r); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// moveCustomerTables runs the example's steps 202–205: MoveTables customer
// and corder from commerce to customer, switch all traffic, complete. It
// resumes a workflow left half-way by an interrupted Up.
func (c *Cluster) moveCustomerTables(ctx context.Context) error {
	const wf = "commerce2customer"
	w, err := c.workflow(ctx, "customer", wf)
	if err != nil {
		return err
	}
	if w == nil {
		vs, err := c.getVSchema(ctx, "customer")
		if err != nil && !isNotFound(err) {
			return err
		}
		if vs != nil {
			if _, moved := vs.Tables["customer"]; moved {
				return nil
			}
		}
		if err := c.waitVReplicationOpen(ctx, "customer"); err != nil {
			return err
		}
		c.log.Info("MoveTables commerce → customer", "workflow", wf, "tables", "customer,corder")
		if _, err := c.vtctl(ctx, "MoveTables", "--workflow", wf, "--target-keyspace", "customer", "create",
			"--source-keyspace", "commerce", "--tables", "customer,corder"); err != nil {
			return err
		}
	}
	if err := c.waitCaughtUp(ctx, "customer", wf); err != nil {
		return err
	}
	if err := c.switchTraffic(ctx, "customer", wf); err != nil {
		return err
	}
	return c.complete(ctx, "customer", wf)
}

// shardCustomerVSchema runs the example's step 301: sequence tables in
// commerce, customer/corder without MySQL auto_increment, and the sharded
// vschema on customer (still one shard, "0") so that it can be resharded
// and inserts get ids from the sequences. The customer vschema is applied
// last: its being sharded marks the step done.
func (c *Cluster) shardCustomerVSchema(ctx context.Context, example func(string) string) error {
	vs, err := c.getVSchema(ctx, "customer")
	if err != nil {
		return err
	}
	if vs.Sharded {
		return nil
	}
	c.log.Info("creating sequences and the sharded customer vschema")
	seq, err := os.ReadFile(example("create_commerce_seq.sql"))
	if err != nil {
		return err
	}
	// "insert ignore" so that a re-run after a failure half-way is harmless.
	seqSQL := regexp.MustCompile(`(?i)\binsert\s+into\b`).ReplaceAllString(string(seq), "insert ignore into")
	steps := [][]string{
		{"ApplySchema", "--sql", seqSQL, "commerce"},
		{"ApplyVSchema", "--vschema-file", example("vschema_commerce_seq.json"), "commerce"},
		{"ApplySchema", "--sql-file", example("create_customer_sharded.sql"), "customer"},
		{"ApplyVSchema", "--vschema-file", example("vschema_customer_sharded.json"), "customer"},
	}
	for _, s := range steps {
		if _, err := c.vtctl(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// Down stops every cluster process (gracefully, then by force) and deletes
// the data root. Processes are found by the pid files in the data root and,
// for anything left, by the data root path in their command line.
func (c *Cluster) Down(ctx context.Context) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	var errs []error
	if pid := c.daemonPid(vtgateD); pid != 0 {
		c.log.Info("stopping vtgate", "pid", pid)
		errs = append(errs, stopPid(ctx, pid, "vtgate", 20*time.Second))
	}
	uids := c.tabletUIDsOnDisk()
	var wg sync.WaitGroup
	tabErrs := make([]error, len(uids))
	for i, uid := range uids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tabErrs[i] = c.stopTabletProcs(ctx, uid)
		}()
	}
	wg.Wait()
	errs = append(errs, tabErrs...)
	for _, d := range []daemon{vtctldD, etcdD} {
		if pid := c.daemonPid(d); pid != 0 {
			c.log.Info("stopping "+d.name, "pid", pid)
			errs = append(errs, stopPid(ctx, pid, d.name, 20*time.Second))
		}
	}
	// With the trailing slash, another cluster whose data root merely
	// starts with the same name is left alone.
	for _, pid := range pidsMentioning(c.dataRoot + "/") {
		c.log.Warn("stopping leftover process", "pid", pid)
		errs = append(errs, stopPid(ctx, pid, c.dataRoot+"/", 10*time.Second))
	}
	// vtgate's arguments do not name the data root; its environment does.
	for _, pid := range c.ownProcesses("", "") {
		c.log.Warn("stopping leftover process", "pid", pid)
		errs = append(errs, stopPid(ctx, pid, "", 10*time.Second))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stopping the cluster (data root kept): %w", err)
	}
	if err := os.RemoveAll(c.dataRoot); err != nil {
		return err
	}
	c.log.Info("cluster down, data root removed", "data_root", c.dataRoot, "took", since(start))
	return nil
}

// tabletUIDsOnDisk lists the uids of all tablet directories, recorded or
// not, so that Down also stops tablets whose record was lost.
func (c *Cluster) tabletUIDsOnDisk() []int {
	dirs, _ := filepath.Glob(filepath.Join(c.dataRoot, "vt_*"))
	var uids []int
	for _, d := range dirs {
		if uid, err := strconv.Atoi(strings.TrimLeft(strings.TrimPrefix(filepath.Base(d), "vt_"), "0")); err == nil {
			uids = append(uids, uid)
		}
	}
	return uids
}
