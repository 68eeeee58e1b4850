package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the name the test Sentinels monitor.
const SentinelMaster = "vsgmaster"

// Sentinel is a primary, one replica and three Sentinels monitoring them,
// started for a test.
type Sentinel struct {
	Data      []*Node // the primary and the replica, in no particular order after a failover
	Sentinels []*Node
}

// StartSentinel starts the deployment and waits until every Sentinel
// knows the replica and the other Sentinels.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	data := []string{"--appendonly", "no", "--save", ""}
	primary := StartNode(tb, NodeOptions{Args: data})
	replica := StartNode(tb, NodeOptions{Args: append(data, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))})
	s := &Sentinel{Data: []*Node{primary, replica}}
	conf := fmt.Sprintf(`sentinel monitor %[1]s 127.0.0.1 %[2]d 2
sentinel down-after-milliseconds %[1]s 2000
sentinel failover-timeout %[1]s 10000
sentinel parallel-syncs %[1]s 1
`, SentinelMaster, primary.Port)
	for range 3 {
		s.Sentinels = append(s.Sentinels, StartNode(tb, NodeOptions{Conf: conf, Args: []string{"--sentinel"}}))
	}
	WaitFor(tb, 30*time.Second, "the replica to sync", func() bool { return linkUp(tb, replica) })
	WaitFor(tb, 60*time.Second, "the Sentinels to know each other and the replica", func() bool {
		for _, n := range s.Sentinels {
			c := n.Client(tb)
			reps, err := c.Do(context.Background(), "sentinel", "replicas", SentinelMaster).Slice()
			if err != nil || len(reps) != 1 {
				return false
			}
			others, err := c.Do(context.Background(), "sentinel", "sentinels", SentinelMaster).Slice()
			if err != nil || len(others) != len(s.Sentinels)-1 {
				return false
			}
		}
		return true
	})
	return s
}

// URL is the deployment's redis+sentinel:// address.
func (s *Sentinel) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + SentinelMaster
}

// Primary returns the data node every Sentinel names as the primary, or
// nil while they disagree.
func (s *Sentinel) Primary(tb testing.TB) *Node {
	var addr string
	for i, n := range s.Sentinels {
		v, err := n.Client(tb).Do(context.Background(), "sentinel", "get-master-addr-by-name", SentinelMaster).StringSlice()
		if err != nil || len(v) != 2 {
			return nil
		}
		a := net.JoinHostPort(v[0], v[1])
		if i > 0 && a != addr {
			return nil
		}
		addr = a
	}
	for _, n := range s.Data {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Failover asks a Sentinel to promote the replica (SENTINEL FAILOVER) and
// waits until every Sentinel names it, it serves as the primary and the
// former primary follows it, in sync. It returns the new primary.
//
// SENTINEL FAILOVER does not coordinate with the old primary: between the
// promotion and the old primary's demotion (Sentinel reconfigures it when
// it next looks at it) writes to it are accepted and then lost.
func (s *Sentinel) Failover(tb testing.TB) *Node {
	tb.Helper()
	old := s.Primary(tb)
	if old == nil {
		tb.Fatal("the Sentinels disagree on the primary before the failover")
	}
	if err := s.Sentinels[0].Client(tb).Do(context.Background(), "sentinel", "failover", SentinelMaster).Err(); err != nil {
		tb.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	var promoted *Node
	WaitFor(tb, 45*time.Second, "the Sentinels to switch the primary and the old one to follow", func() bool {
		p := s.Primary(tb)
		if p == nil || p == old || roleOf(tb, p) != "master" {
			return false
		}
		promoted = p
		return roleOf(tb, old) == "slave" && linkUp(tb, old)
	})
	return promoted
}
