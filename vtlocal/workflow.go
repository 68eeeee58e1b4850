package vtlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxLag is the VReplication lag under which a workflow counts as caught
// up. SwitchTraffic itself refuses to switch above 30 s.
const maxLag = 10 * time.Second

// int64 fields arrive as JSON strings from protojson; accept both.
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	*f = flexInt(n)
	return err
}

type workflowInfo struct {
	Name   string `json:"name"`
	Source struct {
		Keyspace string   `json:"keyspace"`
		Shards   []string `json:"shards"`
	} `json:"source"`
	Target struct {
		Keyspace string   `json:"keyspace"`
		Shards   []string `json:"shards"`
	} `json:"target"`
	MaxVReplicationLag flexInt `json:"max_v_replication_lag"`
	WorkflowType       string  `json:"workflow_type"`
	ShardStreams       map[string]struct {
		Streams []struct {
			ID         flexInt           `json:"id"`
			Shard      string            `json:"shard"`
			State      string            `json:"state"`
			Position   string            `json:"position"`
			Message    string            `json:"message"`
			CopyStates []json.RawMessage `json:"copy_states"`
		} `json:"streams"`
	} `json:"shard_streams"`
}

// workflow returns the workflow, or nil if the keyspace has none by that name.
func (c *Cluster) workflow(ctx context.Context, keyspace, name string) (*workflowInfo, error) {
	var resp struct {
		Workflows []workflowInfo `json:"workflows"`
	}
	err := c.vtctlJSON(ctx, &resp, "Workflow", "--keyspace", keyspace, "show", "--workflow", name, "--include-logs=false")
	if err != nil {
		if strings.Contains(err.Error(), "no workflow") || isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	for i := range resp.Workflows {
		if resp.Workflows[i].Name == name {
			return &resp.Workflows[i], nil
		}
	}
	return nil, nil
}

// command is the vtctldclient command family that manages the workflow.
func (w *workflowInfo) command() string {
	if strings.EqualFold(w.WorkflowType, "Reshard") {
		return "Reshard"
	}
	return "MoveTables"
}

// caughtUp reports whether every stream has finished copying, is Running
// and the workflow's lag is small; a stream in Error fails at once.
func (w *workflowInfo) caughtUp() (bool, error) {
	n := 0
	for _, ss := range w.ShardStreams {
		for _, s := range ss.Streams {
			n++
			if strings.EqualFold(s.State, "Error") {
				return false, fatal(fmt.Errorf("workflow %s stream %d on %s: %s", w.Name, s.ID, s.Shard, s.Message))
			}
			// A new stream is briefly Running (with no copy state and no
			// position) before its copy phase starts; only Running with a
			// position and nothing left to copy means the copy is done.
			if !strings.EqualFold(s.State, "Running") || len(s.CopyStates) > 0 || s.Position == "" {
				return false, fmt.Errorf("stream %d on %s: %s, %d tables still copying", s.ID, s.Shard, s.State, len(s.CopyStates))
			}
		}
	}
	if n == 0 {
		return false, errors.New("no streams yet")
	}
	if lag := time.Duration(w.MaxVReplicationLag) * time.Second; lag > maxLag {
		return false, fmt.Errorf("lag %s", lag)
	}
	return true, nil
}

func (c *Cluster) waitCaughtUp(ctx context.Context, keyspace, name string) error {
	return c.poll(ctx, c.timeout, "workflow "+keyspace+"."+name+" to finish copying", func() (bool, error) {
		w, err := c.workflow(ctx, keyspace, name)
		if err != nil {
			return false, err
		}
		if w == nil {
			return false, fatal(fmt.Errorf("workflow %s.%s does not exist", keyspace, name))
		}
		return w.caughtUp()
	})
}

// trafficState is the human-readable switch state, e.g. "All Reads
// Switched. Writes Switched" or "Reads Not Switched. Writes Not Switched".
func (c *Cluster) trafficState(ctx context.Context, w *workflowInfo) (string, error) {
	var st struct {
		TrafficState string `json:"traffic_state"`
	}
	err := c.vtctlJSON(ctx, &st, w.command(), "--target-keyspace", w.Target.Keyspace, "--workflow", w.Name, "status", "--format", "json")
	return st.TrafficState, err
}

func writesSwitched(state string) bool {
	return strings.Contains(state, "Writes Switched") && !strings.Contains(state, "Not Switched")
}

// Reshard creates the Reshard workflow from the shards in from to those in
// to (comma-separated, e.g. "0" → "-80,80-"; the target shards must exist,
// see AddShards) and waits until its copy phase is done and it replicates
// with low lag. The workflow copies the schema to the new shards itself.
// Calling it again for an existing workflow only waits.
func (c *Cluster) Reshard(ctx context.Context, keyspace, workflow, from, to string) error {
	return c.createWorkflow(ctx, keyspace, workflow, "Reshard", "--source-shards", from, "--target-shards", to)
}

// createWorkflow creates workflow in keyspace (its target) with the
// command family's create arguments, unless it exists, and waits until
// its copy phase is done and it replicates with low lag.
func (c *Cluster) createWorkflow(ctx context.Context, keyspace, workflow, command string, args ...string) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	w, err := c.workflow(ctx, keyspace, workflow)
	if err != nil {
		return err
	}
	if w == nil {
		if err := c.waitVReplicationOpen(ctx, keyspace); err != nil {
			return err
		}
		c.log.Info("creating workflow", "command", command, "keyspace", keyspace, "workflow", workflow, "args", args)
		if _, err := c.vtctl(ctx, append([]string{command, "--workflow", workflow, "--target-keyspace", keyspace, "create"}, args...)...); err != nil {
			return err
		}
	}
	if err := c.waitCaughtUp(ctx, keyspace, workflow); err != nil {
		return err
	}
	c.log.Info("workflow copied and running", "keyspace", keyspace, "workflow", workflow, "took", since(start))
	return nil
}

// SwitchTraffic switches reads and writes of a MoveTables or Reshard
// workflow (whichever it is) to its target, then waits until vtgate serves
// queries again. A no-op when writes are already switched.
func (c *Cluster) SwitchTraffic(ctx context.Context, keyspace, workflow string) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return c.switchTraffic(ctx, keyspace, workflow)
}

func (c *Cluster) switchTraffic(ctx context.Context, keyspace, workflow string) error {
	return c.moveTraffic(ctx, keyspace, workflow, "switchtraffic", true)
}

// moveTraffic runs the traffic verb (switchtraffic or reversetraffic) of
// workflow unless its writes are already where toTarget says, waits until
// they are, then until vtgate serves queries again.
func (c *Cluster) moveTraffic(ctx context.Context, keyspace, workflow, verb string, toTarget bool) error {
	start := time.Now()
	w, err := c.workflow(ctx, keyspace, workflow)
	if err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("no workflow %s in keyspace %s", workflow, keyspace)
	}
	state, err := c.trafficState(ctx, w)
	if err != nil {
		return err
	}
	if writesSwitched(state) != toTarget {
		c.log.Info("moving traffic", "verb", verb, "keyspace", keyspace, "workflow", workflow, "command", w.command())
		if _, err := c.vtctl(ctx, w.command(), "--workflow", workflow, "--target-keyspace", keyspace,
			verb, "--tablet-types", "rdonly,replica,primary"); err != nil {
			return err
		}
		if err := c.poll(ctx, c.timeout, verb+" of "+workflow, func() (bool, error) {
			state, err := c.trafficState(ctx, w)
			if err == nil && writesSwitched(state) != toTarget {
				err = errors.New(state)
			}
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	if c.daemonPid(vtgateD) != 0 {
		if err := c.waitVtgate(ctx, c.probes(ctx)); err != nil {
			return err
		}
	}
	c.log.Info("traffic moved", "verb", verb, "keyspace", keyspace, "workflow", workflow, "took", since(start))
	return nil
}

// Complete finishes a switched workflow. For MoveTables the source tables
// are dropped; for Reshard, Vitess deletes the old shards from the
// topology, and their tablets (vttablet, mysqld, data) are then removed
// here too. A no-op if the workflow no longer exists.
func (c *Cluster) Complete(ctx context.Context, keyspace, workflow string) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return c.complete(ctx, keyspace, workflow)
}

func (c *Cluster) complete(ctx context.Context, keyspace, workflow string) error {
	start := time.Now()
	w, err := c.workflow(ctx, keyspace, workflow)
	if err != nil {
		return err
	}
	if w != nil {
		if err := c.endWorkflow(ctx, w, keyspace, "complete"); err != nil {
			return err
		}
	}
	if err := c.removeDeletedShardTablets(ctx); err != nil {
		return err
	}
	if c.daemonPid(vtgateD) != 0 {
		if err := c.waitVtgate(ctx, c.probes(ctx)); err != nil {
			return err
		}
	}
	c.log.Info("workflow complete", "keyspace", keyspace, "workflow", workflow, "took", since(start))
	return nil
}

// removeDeletedShardTablets stops and forgets every recorded tablet whose
// shard no longer exists in the topology (Reshard complete deletes the
// source shards but leaves their processes running).
func (c *Cluster) removeDeletedShardTablets(ctx context.Context) error {
	recs, err := c.Tablets()
	if err != nil {
		return err
	}
	shardsOf := map[string][]string{}
	for _, r := range recs {
		shards, ok := shardsOf[r.Keyspace]
		if !ok {
			if shards, err = c.shards(ctx, r.Keyspace); err != nil && !isNotFound(err) {
				return err
			}
			shardsOf[r.Keyspace] = shards
		}
		if slices.Contains(shards, r.Shard) {
			continue
		}
		c.log.Info("removing tablet of deleted shard", "alias", r.Alias(), "shard", r.Keyspace+"/"+r.Shard)
		if err := c.stopTabletProcs(ctx, r.UID); err != nil {
			return err
		}
		if t, _ := c.tabletByUID(ctx, r.UID); t != nil {
			if _, err := c.vtctl(ctx, "DeleteTablets", "--allow-primary", r.Alias()); err != nil && !isNotFound(err) {
				return err
			}
		}
		if err := os.RemoveAll(c.tabletDir(r.UID)); err != nil {
			return err
		}
		if err := c.forgetTablet(r.UID); err != nil {
			return err
		}
	}
	return nil
}

// AddShards starts one primary tablet for each new shard of keyspace (e.g.
// "-80", "80-" before a Reshard from "0"). The new shards stay
// non-serving until a Reshard's SwitchTraffic; their schema is copied by
// the Reshard workflow. Uids: customer -80 → 300, 80- → 400 (as in the
// Vitess example), other shards 500, 600, ... recorded in tablets.json.
func (c *Cluster) AddShards(ctx context.Context, keyspace string, shards []string) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	var recs []TabletRecord
	for _, s := range shards {
		uid, err := c.assignUID(keyspace, s)
		if err != nil {
			return err
		}
		recs = append(recs, TabletRecord{UID: uid, Keyspace: keyspace, Shard: s})
	}
	if err := c.startTablets(ctx, recs); err != nil {
		return err
	}
	for _, r := range recs {
		if err := c.ensurePrimary(ctx, r); err != nil {
			return err
		}
	}
	if err := c.waitVReplicationOpen(ctx, keyspace); err != nil {
		return err
	}
	c.log.Info("shards added", "keyspace", keyspace, "shards", shards, "took", since(start))
	return nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

// MoveTables creates a MoveTables workflow that moves tables
// (comma-separated) from keyspace source into keyspace target, and waits
// until its copy phase is done and it replicates with low lag. The target
// keyspace must exist; for a sharded target its vschema must already
// name the tables. Calling it again for an existing workflow only waits.
func (c *Cluster) MoveTables(ctx context.Context, target, workflow, source, tables string) error {
	return c.createWorkflow(ctx, target, workflow, "MoveTables", "--source-keyspace", source, "--tables", tables)
}

// ReverseTraffic switches the traffic of a switched MoveTables or Reshard
// workflow back to its source (the reverse workflow Vitess set up at the
// switch carries the rows written meanwhile), then waits until vtgate
// serves queries again. A no-op when writes are not switched.
func (c *Cluster) ReverseTraffic(ctx context.Context, keyspace, workflow string) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return c.moveTraffic(ctx, keyspace, workflow, "reversetraffic", false)
}

// Cancel cancels a workflow whose writes are not switched (MoveTables:
// the target tables are dropped, the source stays as it was).
func (c *Cluster) Cancel(ctx context.Context, keyspace, workflow string) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	w, err := c.workflow(ctx, keyspace, workflow)
	if err != nil || w == nil {
		return err
	}
	return c.endWorkflow(ctx, w, keyspace, "cancel")
}

// endWorkflow runs the workflow's verb that removes it (complete or
// cancel) and waits until it is gone.
func (c *Cluster) endWorkflow(ctx context.Context, w *workflowInfo, keyspace, verb string) error {
	c.log.Info("ending workflow", "verb", verb, "keyspace", keyspace, "workflow", w.Name, "command", w.command())
	if _, err := c.vtctl(ctx, w.command(), "--workflow", w.Name, "--target-keyspace", keyspace, verb); err != nil {
		return err
	}
	return c.poll(ctx, c.timeout, "workflow "+w.Name+" to disappear", func() (bool, error) {
		w, err := c.workflow(ctx, keyspace, w.Name)
		return err == nil && w == nil, err
	})
}
