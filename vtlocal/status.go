package vtlocal

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Status is a snapshot of the cluster's processes and topology.
type Status struct {
	DataRoot  string
	Processes []Process
	Keyspaces []KeyspaceStatus
	// TopoError is set when the topology could not be read (vtctld down).
	TopoError string
}

// Process is one cluster process.
type Process struct {
	Name    string // etcd, vtctld, vtgate, vttablet-100, mysqld-100
	PID     int    // 0 when not running
	Running bool
	Ports   []int
}

// KeyspaceStatus lists a keyspace's shards.
type KeyspaceStatus struct {
	Name   string
	Shards []ShardStatus
}

// ShardStatus is a shard with its primary and tablets.
type ShardStatus struct {
	Name    string
	Serving bool   // is_primary_serving: vtgate routes primary traffic here
	Primary string // primary tablet alias, "" if none
	Tablets []TabletStatus
}

// TabletStatus is a tablet as the topology sees it.
type TabletStatus struct {
	Alias string
	UID   int
	Type  string
}

// Status reports which processes run and the keyspaces, shards and tablets
// in the topology. It does not fail when the cluster is down.
func (c *Cluster) Status(ctx context.Context) (*Status, error) {
	st := &Status{DataRoot: c.dataRoot}
	for _, d := range []daemon{etcdD, vtctldD, vtgateD} {
		pid := c.daemonPid(d)
		st.Processes = append(st.Processes, Process{Name: d.name, PID: pid, Running: pid != 0, Ports: c.daemonPorts(d)})
	}
	recs, err := c.Tablets()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		vt := readPid(c.vttabletPidFile(r.UID))
		if !pidAlive(vt, "vttablet") {
			vt = 0
		}
		my := c.mysqldPid(r.UID)
		if !c.mysqldAlive(r.UID) {
			my = 0
		}
		st.Processes = append(st.Processes,
			Process{Name: fmt.Sprintf("vttablet-%d", r.UID), PID: vt, Running: vt != 0, Ports: []int{c.tabletWebPort(r.UID), c.tabletGRPCPort(r.UID)}},
			Process{Name: fmt.Sprintf("mysqld-%d", r.UID), PID: my, Running: my != 0, Ports: []int{c.tabletMySQLPort(r.UID)}})
	}
	if c.daemonPid(vtctldD) == 0 {
		st.TopoError = "vtctld is not running"
		return st, nil
	}
	names, err := c.keyspaces(ctx)
	if err != nil {
		st.TopoError = err.Error()
		return st, nil
	}
	tablets, err := c.tablets(ctx, "", "")
	if err != nil {
		st.TopoError = err.Error()
		return st, nil
	}
	for _, ks := range names {
		kst := KeyspaceStatus{Name: ks}
		shards, err := c.shards(ctx, ks)
		if err != nil {
			st.TopoError = err.Error()
			return st, nil
		}
		for _, sh := range shards {
			rec, err := c.shard(ctx, ks, sh)
			if err != nil {
				st.TopoError = err.Error()
				return st, nil
			}
			ss := ShardStatus{Name: sh, Serving: rec.Shard.IsPrimaryServing, Primary: rec.Shard.PrimaryAlias.String()}
			for _, t := range tablets {
				if t.Keyspace == ks && t.Shard == sh {
					ss.Tablets = append(ss.Tablets, TabletStatus{Alias: t.Alias.String(), UID: t.Alias.UID, Type: string(t.Type)})
				}
			}
			slices.SortFunc(ss.Tablets, func(a, b TabletStatus) int { return a.UID - b.UID })
			kst.Shards = append(kst.Shards, ss)
		}
		st.Keyspaces = append(st.Keyspaces, kst)
	}
	return st, nil
}

// String renders the status for humans.
func (s *Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "data root: %s\n\nprocesses:\n", s.DataRoot)
	for _, p := range s.Processes {
		state := "stopped"
		if p.Running {
			state = fmt.Sprintf("pid %d", p.PID)
		}
		ports := make([]string, len(p.Ports))
		for i, port := range p.Ports {
			ports[i] = fmt.Sprint(port)
		}
		fmt.Fprintf(&b, "  %-14s %-10s ports %s\n", p.Name, state, strings.Join(ports, ","))
	}
	if s.TopoError != "" {
		fmt.Fprintf(&b, "\ntopology: unavailable (%s)\n", s.TopoError)
		return b.String()
	}
	b.WriteString("\nkeyspaces:\n")
	if len(s.Keyspaces) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, k := range s.Keyspaces {
		fmt.Fprintf(&b, "  %s\n", k.Name)
		for _, sh := range k.Shards {
			serving := "not serving"
			if sh.Serving {
				serving = "serving"
			}
			fmt.Fprintf(&b, "    shard %-6s %-11s primary %s\n", sh.Name, serving, orNone(sh.Primary))
			for _, t := range sh.Tablets {
				fmt.Fprintf(&b, "      tablet %s %s\n", t.Alias, t.Type)
			}
		}
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
