package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTick = 0.01

// procCPU returns the CPU seconds (user+system) pid has used so far.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime, fields 14 and 15 of /proc/<pid>/stat,
// counted after the parenthesised command name (which may hold spaces).
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	return float64(u+s) * clockTick, nil
}

// procRSS returns pid's resident set size in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}

// pidsByName lists running processes whose command name (comm) is name.
func pidsByName(name string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// clusterCPU returns the CPU seconds used so far by each of the local
// cluster's processes that serve VStreams (vtgate, vttablet, MariaDB), by
// pid: a process restarted in between (the cluster is shared and may be
// recreated) must not count as negative time.
func clusterCPU() map[int]float64 {
	out := map[int]float64{}
	for _, name := range []string{"vtgate", "vttablet", "mariadbd", "mysqld"} {
		for _, pid := range pidsByName(name) {
			if c, err := procCPU(pid); err == nil {
				out[pid] = c
			}
		}
	}
	return out
}

// cpuDelta sums, over the processes present at both readings, the CPU used
// between them.
func cpuDelta(before, after map[int]float64) float64 {
	var sum float64
	for pid, a := range after {
		if b, ok := before[pid]; ok && a >= b {
			sum += a - b
		}
	}
	return sum
}
