package vtlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runAs describes the account daemons and mysqlctl run as.
type runAs struct {
	uid, gid uint32
	home     string
	name     string
}

// account resolves the run user, creating it when running as root and it
// does not exist yet. With no run user (not root) it returns nil and
// processes run as the caller.
func (c *Cluster) account(ctx context.Context) (*runAs, error) {
	if c.runUser == "" {
		return nil, nil
	}
	u, err := user.Lookup(c.runUser)
	if err != nil {
		c.log.Info("creating unprivileged user", "user", c.runUser)
		if _, err := c.run(ctx, nil, "useradd", "-m", "-s", "/bin/bash", c.runUser); err != nil {
			return nil, err
		}
		if u, err = user.Lookup(c.runUser); err != nil {
			return nil, err
		}
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &runAs{uid: uint32(uid), gid: uint32(gid), home: u.HomeDir, name: u.Username}, nil
}

// env is the environment of every cluster process. mysqlctl and vttablet
// locate the tablet directories through VTDATAROOT, and mysqlctl finds
// mysqld (in /usr/sbin on Debian) through PATH.
func (c *Cluster) env(acct *runAs) []string {
	env := []string{
		"PATH=" + c.binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"VTDATAROOT=" + c.dataRoot,
		"EXTRA_MY_CNF=" + c.myCnfPath(),
		"LANG=C.UTF-8",
		"TMPDIR=" + c.tmpDir(),
	}
	if acct != nil {
		env = append(env, "HOME="+acct.home, "USER="+acct.name, "LOGNAME="+acct.name)
	} else {
		env = append(env, "HOME="+os.Getenv("HOME"), "USER="+os.Getenv("USER"))
	}
	return env
}

func (c *Cluster) sysAttr(acct *runAs) *syscall.SysProcAttr {
	// Setsid detaches daemons from the caller's terminal and process group,
	// so Ctrl-C on the CLI or the end of a test binary does not kill them.
	attr := &syscall.SysProcAttr{Setsid: true}
	if acct != nil {
		attr.Credential = &syscall.Credential{Uid: acct.uid, Gid: acct.gid, Groups: []uint32{}}
	}
	return attr
}

// cmdError carries the tail of a failed command's output, because the last
// lines of stderr are almost always what explains a Vitess failure.
type cmdError struct {
	cmd  string
	err  error
	tail string
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("%s: %v\n--- output tail ---\n%s", e.cmd, e.err, e.tail)
}

func (e *cmdError) Unwrap() error { return e.err }

// run executes a short-lived command as the caller (acct nil) or as acct and
// returns its stdout. stderr is kept for the error.
func (c *Cluster) run(ctx context.Context, acct *runAs, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if acct != nil {
		cmd.Env = c.env(acct)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: acct.uid, Gid: acct.gid, Groups: []uint32{}}}
		cmd.Dir = c.dataRoot
	}
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &cmdError{cmd: shortCmd(name, args), err: err, tail: lastLines(stderr.String()+stdout.String(), 30)}
	}
	return stdout.Bytes(), nil
}

// runLogged executes a command as the run user with stdout and stderr going
// to a log file. A file rather than a pipe matters for mysqlctl: it leaves
// mysqld_safe running, which inherits the descriptors, so with a pipe
// Wait would block for as long as mysqld lives.
func (c *Cluster) runLogged(ctx context.Context, logPath, name string, args ...string) error {
	acct, err := c.account(ctx)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	c.chown(logPath)
	start, _ := f.Seek(0, 2)
	fmt.Fprintf(f, "\n### %s %s\n", time.Now().Format(time.RFC3339), shortCmd(name, args))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = c.env(acct)
	cmd.Dir = c.dataRoot
	cmd.SysProcAttr = c.sysAttr(acct)
	if err := cmd.Run(); err != nil {
		return &cmdError{cmd: shortCmd(name, args), err: err, tail: fileTailFrom(logPath, start, 40)}
	}
	return nil
}

// startDaemon starts a long-running process detached from the caller, with
// output in logPath, and records its pid in pidPath.
func (c *Cluster) startDaemon(ctx context.Context, name, logPath, pidPath string, args ...string) (int, error) {
	acct, err := c.account(ctx)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c.chown(logPath)
	fmt.Fprintf(f, "\n### %s starting %s\n", time.Now().Format(time.RFC3339), shortCmd(name, args))
	cmd := exec.Command(name, args...) // not CommandContext: it must outlive ctx
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = c.env(acct)
	cmd.Dir = c.dataRoot
	cmd.SysProcAttr = c.sysAttr(acct)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	trackChild(cmd.Wait, pid)
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return pid, err
	}
	c.chown(pidPath)
	return pid, nil
}

// readPid returns the pid recorded in path, or 0.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// stopPid sends SIGTERM, waits up to grace for the process to exit, then
// sends SIGKILL. It is a no-op for a pid that is not (or no longer) ours.
func stopPid(ctx context.Context, pid int, want string, grace time.Duration) error {
	if !pidAlive(pid, want) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(ctx, pid, want, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(ctx, pid, want, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("process %d (%s) did not exit after SIGKILL", pid, want)
}

func waitGone(ctx context.Context, pid int, want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !pidAlive(pid, want) {
			return true
		}
		select {
		case <-ctx.Done():
			return !pidAlive(pid, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return !pidAlive(pid, want)
}

// pidsMentioning lists processes whose command line contains s. Every
// cluster process names the data root in its arguments (data dir, pid file,
// defaults file), so this finds stragglers whose pid files were lost.
func pidsMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		// No patience: a scan must not wait on every process that is
		// between fork and exec; none of those is a cluster daemon yet.
		if procAlive(pid, s, 0) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// chown hands a path we created to the run user, which must be able to
// write everything in the data root.
func (c *Cluster) chown(path string) {
	if c.runUser == "" {
		return
	}
	if u, err := user.Lookup(c.runUser); err == nil {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		_ = os.Lchown(path, uid, gid)
	}
}

// mkdirOwned creates dir (and parents inside the data root) owned by the run user.
func (c *Cluster) mkdirOwned(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for d := dir; strings.HasPrefix(d, c.dataRoot); d = filepath.Dir(d) {
		c.chown(d)
	}
	return nil
}

// writeOwned writes a file in the data root owned by the run user.
func (c *Cluster) writeOwned(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	c.chown(path)
	return nil
}

// lock serialises cluster operations between processes (a test and the
// CLI). The lock file sits next to the data root because Down removes the
// data root itself.
func (c *Cluster) lock() (func(), error) {
	path := c.dataRoot + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		c.log.Info("waiting for another vtlocal operation to finish", "lock", path)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func shortCmd(name string, args []string) string {
	s := filepath.Base(name) + " " + strings.Join(args, " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fileTail returns the last n lines of a file (for errors about daemons).
func fileTail(path string, n int) string { return fileTailFrom(path, 0, n) }

func fileTailFrom(path string, from int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	// Only the end of the file matters; cap the read at 64 KiB.
	if st.Size()-from > 64<<10 {
		from = st.Size() - 64<<10
	}
	buf := make([]byte, st.Size()-from)
	k, _ := f.ReadAt(buf, from)
	return lastLines(string(buf[:k]), n)
}

// poll calls check until it returns true, an error it marks fatal, ctx ends
// or d elapses. The last non-fatal error is reported on timeout so that a
// timeout says what was still wrong.
func (c *Cluster) poll(ctx context.Context, d time.Duration, what string, check func() (bool, error)) error {
	start := time.Now()
	deadline := start.Add(d)
	interval := 100 * time.Millisecond
	var last error
	for n := 1; ; n++ {
		ok, err := check()
		if ok {
			c.log.Debug("waited", "for", what, "took", since(start), "checks", n)
			return nil
		}
		var f fatalError
		if errors.As(err, &f) {
			return f.err
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("timed out after %s waiting for %s: %w", d, what, last)
			}
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
		if interval < 500*time.Millisecond {
			interval += 100 * time.Millisecond
		}
	}
}

// fatalError stops poll at once (e.g. the process being waited for died).
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }

func fatal(err error) error { return fatalError{err} }
