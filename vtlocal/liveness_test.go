package vtlocal

import (
	"context"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// freshBinary copies sleep(1) to a new file named name and drops it from the
// page cache, so that starting it reads the disk as a never-run binary does:
// the slow exec that made a starting daemon look dead.
func freshBinary(t *testing.T, dir, name string) string {
	t.Helper()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED)
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func testCluster(t *testing.T) *Cluster {
	t.Helper()
	c, err := New(WithDataRoot(t.TempDir()), WithRunUser(""), WithBinDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.mkdirOwned(c.tmpDir()); err != nil {
		t.Fatal(err)
	}
	return c
}

// A daemon is alive from the moment Start returns, whether judged as our
// child or, as another process would, through its pid file and /proc; and
// dead once it exits. Each round starts a binary that is not in the page
// cache, which is when the command line stays empty longest.
func TestDaemonLivenessFromStart(t *testing.T) {
	c := testCluster(t)
	ctx := context.Background()
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	emptyAtStart := 0
	for i := range rounds {
		bin := freshBinary(t, filepath.Join(c.binDir, strconv.Itoa(i)), "etcd")
		pid, err := c.startDaemon(ctx, bin, c.logFile("etcd"), c.pidFile("etcd"), "30")
		if err != nil {
			t.Fatal(err)
		}
		if !procAlive(pid, "etcd", 0) {
			emptyAtStart++ // the exec window: what the old check fell into
		}
		if c.daemonPid(etcdD) != pid {
			t.Fatalf("round %d: daemon %d started but judged dead (child view)", i, pid)
		}
		if !procAlive(pid, "etcd", execWindow) {
			t.Fatalf("round %d: daemon %d started but judged dead from /proc", i, pid)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		wait.For(t, "the killed daemon to be judged dead", 10*time.Second, func() bool { return c.daemonPid(etcdD) == 0 })
		if procAlive(pid, "etcd", execWindow) {
			t.Fatalf("round %d: reaped daemon %d still judged alive from /proc", i, pid)
		}
	}
	t.Logf("%d of %d starts had an empty command line right after Start", emptyAtStart, rounds)
}

// Up recovers from leftovers of its own data root: a daemon whose pid file
// was lost is adopted, a surplus one stopped; processes of another data root
// are left alone.
func TestReclaimLeftovers(t *testing.T) {
	c := testCluster(t)
	other := testCluster(t)
	ctx := context.Background()
	bin := freshBinary(t, c.binDir, "etcd")
	pidPath := c.pidFile("etcd")
	start := func(c *Cluster) int {
		t.Helper()
		pid, err := c.startDaemon(ctx, bin, c.logFile("etcd"), c.pidFile("etcd"), "60")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	foreign := start(other)

	// An orphan: running, but its pid file is gone.
	orphan := start(c)
	if err := os.Remove(pidPath); err != nil {
		t.Fatal(err)
	}
	if got := c.reclaimDaemon(ctx, etcdD); got != orphan {
		t.Fatalf("reclaim = %d, want the orphan %d adopted", got, orphan)
	}
	if got := readPid(pidPath); got != orphan {
		t.Fatalf("pid file = %d after adoption, want %d", got, orphan)
	}

	// A second instance overwrote the pid file (the old etcd retry did
	// this): the recorded one stays, the surplus one is stopped.
	second := start(c)
	if got := c.reclaimDaemon(ctx, etcdD); got != second {
		t.Fatalf("reclaim = %d, want the recorded %d", got, second)
	}
	wait.For(t, "the surplus daemon to stop", 10*time.Second, func() bool { return !pidAlive(orphan, "etcd") })

	// Two orphans and no pid file: neither can be told right, both stop.
	third := start(c)
	if err := os.Remove(pidPath); err != nil {
		t.Fatal(err)
	}
	if got := c.reclaimDaemon(ctx, etcdD); got != 0 {
		t.Fatalf("reclaim with two orphans = %d, want 0", got)
	}
	wait.For(t, "both orphans to stop", 10*time.Second, func() bool { return !pidAlive(second, "etcd") && !pidAlive(third, "etcd") })

	if !pidAlive(foreign, "etcd") {
		t.Fatal("the other data root's daemon was stopped")
	}
}
