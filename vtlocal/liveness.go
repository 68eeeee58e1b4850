package vtlocal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Deciding whether a daemon lives.
//
// A daemon this process started is judged by its own Wait: nothing else is
// exact. Reading /proc/<pid>/cmdline right after exec.Cmd.Start returns is
// not: Start returns once execve has closed the parent's close-on-exec pipe,
// but the new program's argument area is set up later (after the ELF and its
// interpreter are loaded, which on a cold page cache means disk reads), and
// until then cmdline reads empty. A check of the command line in that window
// took a starting etcd, vtctld or vttablet for a dead one.
//
// A daemon found through a pid file (started by an earlier run of the CLI or
// of a test binary) is judged by /proc, with the command line as a guard
// against a recycled pid; an empty command line there is waited out for a
// moment rather than taken as "not ours".

// children maps the pid of every daemon this process started and has not yet
// reaped to a channel closed when it exits.
var children sync.Map // int → chan struct{}

// trackChild reaps a started daemon in the background and records when it
// exits. Reaping also keeps a dead daemon from lingering as a zombie that
// /proc would still list.
func trackChild(wait func() error, pid int) {
	done := make(chan struct{})
	children.Store(pid, done)
	go func() {
		_ = wait()
		close(done)
		// A later check of this pid goes to /proc, where the pid is gone
		// (or, recycled, fails the command-line check).
		children.CompareAndDelete(pid, done)
	}()
}

// execWindow bounds how long an empty command line is taken for a process
// still inside execve. Loading a binary from a cold disk takes milliseconds;
// a second covers a busy machine.
const execWindow = time.Second

// pidAlive reports whether pid is a live (non-zombie) process whose command
// line contains want.
func pidAlive(pid int, want string) bool {
	if pid <= 0 {
		return false
	}
	if done, ok := children.Load(pid); ok {
		select {
		case <-done.(chan struct{}):
			return false
		default:
			return true
		}
	}
	return procAlive(pid, want, execWindow)
}

// procAlive judges a process that is not our child from /proc. patience is
// how long an empty command line (a process inside execve) is waited out.
func procAlive(pid int, want string, patience time.Duration) bool {
	deadline := time.Now().Add(patience)
	for {
		st, ok := readProcStat(pid)
		if !ok || st.state == 'Z' || st.kernelThread() {
			return false
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return false
		}
		if len(cmdline) > 0 {
			return bytes.Contains(cmdline, []byte(want))
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procStat holds the fields of /proc/<pid>/stat that liveness needs.
type procStat struct {
	state byte
	flags uint64
}

// pfKthread is PF_KTHREAD from the kernel's sched.h: kernel threads have an
// empty command line for good, so they must not be waited on.
const pfKthread = 0x00200000

func (s procStat) kernelThread() bool { return s.flags&pfKthread != 0 }

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// "pid (comm) S ppid pgrp session tty tpgid flags ...": comm may hold
	// spaces and parentheses, so fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 7 {
		return procStat{}, false
	}
	flags, _ := strconv.ParseUint(string(f[6]), 10, 64)
	return procStat{state: f[0][0], flags: flags}, true
}

// ownProcesses lists live processes of this cluster running binary name
// (argv[0]'s base name; "" for any) whose command line also contains arg
// ("" for any). A process belongs to the cluster when its environment names
// this data root: every daemon gets VTDATAROOT from env, including vtgate,
// whose arguments do not mention the data root.
func (c *Cluster) ownProcesses(name, arg string) []int {
	entries, _ := os.ReadDir("/proc")
	marker := []byte("VTDATAROOT=" + c.dataRoot + "\x00")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, ok := readProcStat(pid); !ok || st.state == 'Z' || st.kernelThread() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if name != "" && filepath.Base(string(argv0)) != name {
			continue
		}
		if arg != "" && !bytes.Contains(cmdline, []byte(arg)) {
			continue
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(environ, marker) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// reclaim makes the pid file of a daemon name the one live instance of it in
// this cluster, so that Up recovers from whatever an interrupted run left:
// a daemon whose pid file was lost or overwritten is adopted (its pid file
// rewritten), and surplus instances are stopped. arg narrows the match (a
// tablet's alias). It returns the live pid, or 0 when none is left.
func (c *Cluster) reclaim(ctx context.Context, name, arg, pidPath string) int {
	recorded := readPid(pidPath)
	if !pidAlive(recorded, name) {
		recorded = 0
	}
	var others []int
	for _, pid := range c.ownProcesses(name, arg) {
		if pid != recorded {
			others = append(others, pid)
		}
	}
	if recorded == 0 && len(others) == 1 {
		c.log.Warn("adopting a running "+name+" of this cluster whose pid file was lost", "pid", others[0])
		if err := c.writeOwned(pidPath, []byte(strconv.Itoa(others[0])+"\n")); err == nil {
			return others[0]
		}
	}
	for _, pid := range others {
		c.log.Warn("stopping a surplus "+name+" of this cluster", "pid", pid)
		_ = stopPid(ctx, pid, name, 10*time.Second)
	}
	return recorded
}
