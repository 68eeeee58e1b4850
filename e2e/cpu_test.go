package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pidsByCommand lists the running processes whose command name is one of
// names.
func pidsByCommand(names ...string) map[string][]int {
	out := map[string][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(comm)); slices.Contains(names, name) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			out[name] = append(out[name], pid)
		}
	}
	return out
}

// cpuTicks returns the CPU time (user+system, in clock ticks of 10 ms) used
// so far by each process of the cluster, the gateway and the test itself
// ("client"), keyed by command name. Benchmarks report the difference
// across a run: on a machine shared by the cluster and the gateway,
// whoever burns the CPU sets the pace.
func cpuTicks() map[string]int {
	procs := pidsByCommand("vtgate", "vttablet", "mariadbd", "mysqld", "vstream-gateway")
	procs["client"] = []int{os.Getpid()}
	out := map[string]int{}
	for name, pids := range procs {
		for _, pid := range pids {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
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

// clusterCommands are the processes of the local cluster.
var clusterCommands = []string{"vtgate", "vttablet", "vtctld", "etcd", "mariadbd", "mysqld"}

// splitCPUs moves the cluster's processes off the CPUs this test may run
// on, when it runs on only some of them (make bench runs the benchmark a
// second time under `taskset -c 1`), and back when the test ends. The
// gateway, started by the test, inherits the test's CPUs. This models the
// usual deployment, the gateway on hosts of its own, and measures whether
// the gateway keeps up with what vtgate sends rather than what it costs
// vtgate to share two cores with it. It returns a label of the layout.
func splitCPUs(t *testing.T) string {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return "shared"
	}
	all := parseCPUList(strings.TrimSpace(string(online)))
	mine := map[int]bool{}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				for _, c := range parseCPUList(strings.TrimSpace(v)) {
					mine[c] = true
				}
			}
		}
	}
	var others []string
	for _, c := range all {
		if !mine[c] {
			others = append(others, strconv.Itoa(c))
		}
	}
	pids := pidsByCommand(clusterCommands...)
	pin := func(list string) {
		for name, ps := range pids {
			for _, pid := range ps {
				if out, err := exec.Command("taskset", "-a", "-p", "-c", list, strconv.Itoa(pid)).CombinedOutput(); err != nil {
					t.Logf("taskset %s (%s): %v %s", name, list, err, out)
				}
			}
		}
	}
	if len(mine) == 0 || len(others) == 0 {
		// Undo what a split run killed before its clean-up may have left.
		pin(strings.TrimSpace(string(online)))
		return "shared (cluster, gateway and clients on all CPUs)"
	}
	pin(strings.Join(others, ","))
	t.Cleanup(func() { pin(strings.TrimSpace(string(online))) })
	var minel []string
	for _, c := range all {
		if mine[c] {
			minel = append(minel, strconv.Itoa(c))
		}
	}
	return fmt.Sprintf("split (cluster on CPU %s; gateway and clients on CPU %s)", strings.Join(others, ","), strings.Join(minel, ","))
}

// parseCPUList parses a kernel CPU list such as "0-3,6".
func parseCPUList(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if found {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}
