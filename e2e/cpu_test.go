package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cpuTicks returns the CPU time (user+system, in clock ticks of 10 ms) used
// so far by each process of the cluster, the gateway and the test itself,
// keyed by command name. Benchmarks report the difference across a run:
// on a machine shared by the cluster and the gateway, whoever burns the
// CPU sets the pace.
func cpuTicks() map[string]int {
	out := map[string]int{}
	self := os.Getpid()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		switch {
		case pid == self:
			name = "client"
		case name == "vtgate", name == "vttablet", name == "mariadbd", name == "mysqld", name == "vstream-gateway":
		default:
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state is field 3;
		// utime and stime are fields 14 and 15.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		out[name] += u + st
	}
	return out
}

// cpuSince formats the CPU used by each process since before, in ms.
func cpuSince(before map[string]int) string {
	after := cpuTicks()
	var names []string
	for k := range after {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		if d := after[k] - before[k]; d > 0 {
			fmt.Fprintf(&b, " %s=%dms", k, d*10)
		}
	}
	return b.String()
}
