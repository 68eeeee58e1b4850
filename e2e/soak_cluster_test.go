package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// soakCluster makes sure the soak starts from the cluster vtlocal makes:
// customer on its one shard 0 holding customer and corder, commerce on
// shard 0 without them, no routing rules and no workflow. A soak that
// failed half-way leaves customer resharded, or the tables moved to
// commerce (vtgate then routes customer.customer there), or a workflow
// with its routing rules; the writer's inserts then go elsewhere or
// fail. Anything else than the start is recreated (down, up): a fresh
// cluster also drops the journals of earlier runs.
func soakCluster(t *testing.T, ctx context.Context) {
	t.Helper()
	err := soakClusterState(ctx)
	if err == nil {
		return
	}
	t.Logf("SOAK: the cluster is not as vtlocal makes it (%v): recreating it", err)
	if err := cluster.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Up(ctx); err != nil {
		t.Fatal(err)
	}
	flushRedis(t, ctx)
	if err := soakClusterState(ctx); err != nil {
		t.Fatalf("SOAK: the cluster just made: %v", err)
	}
}

// soakClusterState says how the cluster differs from where the soak
// starts, or nil.
func soakClusterState(ctx context.Context) error {
	st, err := cluster.Status(ctx)
	if err != nil {
		return err
	}
	if st.TopoError != "" {
		return fmt.Errorf("topology: %s", st.TopoError)
	}
	for _, p := range st.Processes {
		if !p.Running {
			return fmt.Errorf("%s is not running", p.Name)
		}
	}
	shards := map[string][]string{}
	for _, ks := range st.Keyspaces {
		for _, sh := range ks.Shards {
			if !sh.Serving || sh.Primary == "" {
				return fmt.Errorf("shard %s/%s: serving %v, primary %q", ks.Name, sh.Name, sh.Serving, sh.Primary)
			}
			shards[ks.Name] = append(shards[ks.Name], sh.Name)
		}
	}
	for _, ks := range []string{homeKeyspace, otherKeyspace} {
		if !slices.Equal(shards[ks], []string{"0"}) {
			return fmt.Errorf("keyspace %s has shards %v, not 0", ks, shards[ks])
		}
		wfs, err := workflowNames(ctx, ks)
		if err != nil {
			return err
		}
		if len(wfs) > 0 {
			return fmt.Errorf("workflows left in %s: %v", ks, wfs)
		}
		tables, err := vschemaTables(ctx, ks)
		if err != nil {
			return err
		}
		for _, tb := range []string{"customer", "corder"} {
			if slices.Contains(tables, tb) != (ks == homeKeyspace) {
				return fmt.Errorf("the vschema of %s has tables %v", ks, tables)
			}
		}
	}
	if err := noRoutingRules(ctx); err != nil {
		return err
	}
	db, err := cluster.OpenDB("")
	if err != nil {
		return err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	if err := db.QueryRowContext(qctx, "select count(*) from customer.customer where customer_id < 0").Scan(&n); err != nil {
		return fmt.Errorf("customer.customer: %w", err)
	}
	return nil
}

// workflowNames lists the workflows of keyspace.
func workflowNames(ctx context.Context, keyspace string) ([]string, error) {
	out, err := runVtctldclient(ctx, "GetWorkflows", keyspace)
	if err != nil {
		return nil, fmt.Errorf("GetWorkflows %s: %v: %s", keyspace, err, out)
	}
	var v struct {
		Workflows []struct {
			Name string `json:"name"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("GetWorkflows %s: %v: %s", keyspace, err, out)
	}
	var names []string
	for _, w := range v.Workflows {
		names = append(names, w.Name)
	}
	return names, nil
}

// vschemaTables lists the tables of keyspace's vschema.
func vschemaTables(ctx context.Context, keyspace string) ([]string, error) {
	out, err := runVtctldclient(ctx, "GetVSchema", keyspace)
	if err != nil {
		return nil, fmt.Errorf("GetVSchema %s: %v: %s", keyspace, err, out)
	}
	var v struct {
		Tables map[string]json.RawMessage `json:"tables"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("GetVSchema %s: %v: %s", keyspace, err, out)
	}
	var names []string
	for name := range v.Tables {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// freshStreamIDs moves the next _vt.vreplication id of keyspace's
// primaries past any used before (binlogs off: nothing of it reaches a
// stream). Vitess names a MoveTables cutover by a hash of its target
// keyspace, shards and stream ids, and refuses to create one whose id a
// journal on the source primaries already has ("found an entry from a
// previous run"); journals are never deleted. Each cycle's merge makes
// customer/0 on a new tablet, whose stream ids start again at 1: the move
// home of every cycle after the first would otherwise have the first
// one's id. Workflow names play no part in it.
func freshStreamIDs(ctx context.Context, keyspace string) error {
	st, err := cluster.Status(ctx)
	if err != nil {
		return err
	}
	// Increasing from run to run as well: a cluster kept from an earlier
	// run keeps its journals.
	next := time.Now().Unix() - 1_700_000_000
	for _, ks := range st.Keyspaces {
		if ks.Name != keyspace {
			continue
		}
		for _, sh := range ks.Shards {
			q := fmt.Sprintf("alter table _vt.vreplication auto_increment = %d", next)
			if out, err := runVtctldclient(ctx, "ExecuteFetchAsDBA", "--disable-binlogs", sh.Primary, q); err != nil {
				return fmt.Errorf("ExecuteFetchAsDBA %s %q: %v: %s", sh.Primary, q, err, out)
			}
		}
	}
	return nil
}
