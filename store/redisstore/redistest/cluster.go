package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three primaries with one replica each,
// started for a test (six redis-server processes on free loopback ports).
type Cluster struct {
	Nodes []*Node
}

// StartCluster starts the nodes, joins them with redis-cli --cluster
// create and waits until every slot is served and every replica is in
// sync. It skips tb when redis-server cannot run a cluster node or
// redis-cli is missing.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Skip("redis-cli not found: it creates the test cluster (Debian package redis-tools)")
	}
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "3000", "--appendonly", "no", "--save", ""}
	c := &Cluster{}
	create := []string{"--cluster", "create"}
	for i := range 6 {
		n, err := tryStartNode(tb, NodeOptions{Args: args, Bus: true})
		if err != nil && i == 0 && strings.Contains(strings.ToLower(err.Error()), "cluster") {
			tb.Skipf("redis-server cannot run a cluster node: %v", err)
		}
		if err != nil {
			tb.Fatalf("start cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, n)
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, create...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy(tb)
	return c
}

// URL is the cluster's redis+cluster:// address, every node a seed.
func (c *Cluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	primary          bool
	slots            [][2]int
}

func (c *Cluster) topology(tb testing.TB, n *Node) []clusterNode {
	tb.Helper()
	out, err := n.Client(tb).ClusterNodes(context.Background()).Result()
	if err != nil {
		tb.Fatalf("CLUSTER NODES on %s: %v", n.Addr(), err)
	}
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		cn := clusterNode{id: f[0], addr: strings.SplitN(f[1], "@", 2)[0], master: f[3],
			primary: strings.Contains(f[2], "master")}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				cn.slots = append(cn.slots, [2]int{a, b})
			}
		}
		nodes = append(nodes, cn)
	}
	return nodes
}

func (c *Cluster) byAddr(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Primary returns the node serving key's slot and its replica, as the
// first node sees them. Right after a failover that view may still lack
// the demoted primary's new place (gossip takes a moment after every node
// reports itself healthy), so it waits for a view with both.
func (c *Cluster) Primary(tb testing.TB, key string) (primary, replica *Node) {
	tb.Helper()
	slot, err := c.Nodes[0].Client(tb).ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		tb.Fatal(err)
	}
	WaitFor(tb, 30*time.Second, fmt.Sprintf("a primary with a replica for slot %d of %q", slot, key), func() bool {
		primary, replica = c.servedBy(tb, int(slot))
		return primary != nil && replica != nil
	})
	return primary, replica
}

// servedBy is the primary of slot and a replica of it in the first node's
// view, either nil when that view has none.
func (c *Cluster) servedBy(tb testing.TB, slot int) (primary, replica *Node) {
	nodes := c.topology(tb, c.Nodes[0])
	for _, p := range nodes {
		if !p.primary || !serves(p, slot) {
			continue
		}
		primary = c.byAddr(p.addr)
		for _, r := range nodes {
			if r.master == p.id {
				replica = c.byAddr(r.addr)
			}
		}
	}
	return primary, replica
}

func serves(n clusterNode, slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// Failover promotes the replica of the primary serving key's slot with
// CLUSTER FAILOVER (the coordinated manual failover: the primary stops
// writes until its replica has caught up, then they swap) and waits until
// every node agrees and the demoted primary follows the new one. It
// returns the new primary.
func (c *Cluster) Failover(tb testing.TB, key string) *Node {
	tb.Helper()
	// After an earlier failover the old primary may still be joining as
	// a replica: a slot needs its replica back before it can fail over.
	c.waitHealthy(tb)
	old, repl := c.Primary(tb, key)
	tookOver := func() bool {
		for _, n := range c.Nodes {
			p, _ := c.primaryAsSeenBy(tb, n, key)
			if p != repl.Addr() {
				return false
			}
		}
		return roleOf(tb, old) == "slave" && linkUp(tb, old)
	}
	// A manual failover that the primary and replica do not complete
	// within Redis's own 5 s (a loaded machine) is abandoned by Redis:
	// ask again rather than wait for what will not happen.
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		if err := repl.Client(tb).Do(context.Background(), "cluster", "failover").Err(); err != nil {
			tb.Fatalf("CLUSTER FAILOVER on %s: %v", repl.Addr(), err)
		}
		try := time.Now().Add(10 * time.Second)
		for !tookOver() && time.Now().Before(try) {
			time.Sleep(50 * time.Millisecond)
		}
		if tookOver() {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the replica did not take over %s's slot after %d CLUSTER FAILOVER attempts", key, attempt)
		}
	}
	c.waitHealthy(tb)
	return repl
}

func (c *Cluster) primaryAsSeenBy(tb testing.TB, n *Node, key string) (string, bool) {
	slot, err := n.Client(tb).ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		return "", false
	}
	for _, p := range c.topology(tb, n) {
		if p.primary && serves(p, int(slot)) {
			return p.addr, true
		}
	}
	return "", false
}

// waitHealthy waits until every node reports a complete cluster and every
// replica is linked to its primary.
func (c *Cluster) waitHealthy(tb testing.TB) {
	tb.Helper()
	WaitFor(tb, 60*time.Second, "the cluster to be healthy", func() bool {
		for _, n := range c.Nodes {
			info, err := n.Client(tb).ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_slots_ok:16384") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))) {
				return false
			}
			if roleOf(tb, n) == "slave" && !linkUp(tb, n) {
				return false
			}
		}
		return true
	})
}

// roleOf is the first element of ROLE: master, slave or sentinel.
func roleOf(tb testing.TB, n *Node) string {
	v, err := n.Client(tb).Do(context.Background(), "role").Slice()
	if err != nil || len(v) == 0 {
		return ""
	}
	s, _ := v[0].(string)
	return s
}

// linkUp reports whether a replica is connected to its primary and synced.
func linkUp(tb testing.TB, n *Node) bool {
	info, err := n.Client(tb).Info(context.Background(), "replication").Result()
	return err == nil && strings.Contains(info, "master_link_status:up") &&
		!strings.Contains(info, "master_sync_in_progress:1")
}
