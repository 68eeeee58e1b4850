package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/syncbuf"
)

// cacheProxy is Varnish (the Debian package) in front of a gateway, as
// operators put a CDN: examples/varnish/gateway.vcl with the gateway's
// port. Varnish rather than nginx: its waiting list hands a response to
// the requests collapsed on it the moment it lands, where nginx's
// proxy_cache_lock has them look again every 500 ms — half a second more
// for every live poll a cache collapses.
type cacheProxy struct {
	url  string
	pid  int // varnishd's manager; its cache process is in its process group
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan struct{}
}

// startVarnish runs varnishd in the foreground on a free port with a
// working directory of its own, and stops it when the test ends. threads
// is the worker threads kept per pool (two pools): one per client being
// answered at once, so thousands for thousands of pollers whose page
// lands at the same moment.
func startVarnish(t *testing.T, backend string, threads int) *cacheProxy {
	t.Helper()
	varnishd, err := exec.LookPath("varnishd")
	if err != nil {
		if varnishd, err = exec.LookPath("/usr/sbin/varnishd"); err != nil {
			t.Fatal("the cache test needs Varnish: install the Debian package varnish (make test-deps does)")
		}
	}
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	vcl, err := os.ReadFile("../examples/varnish/gateway.vcl")
	if err != nil {
		t.Fatal(err)
	}
	const port = `.port = "8080";`
	if !strings.Contains(string(vcl), port) {
		t.Fatalf("examples/varnish/gateway.vcl has no %s to point at the test's gateway", port)
	}
	// varnishd runs its compiler and cache process as users of its own:
	// the VCL and the working directory must be ones they can reach (a
	// test's TempDir is its owner's only).
	work, err := os.MkdirTemp("/tmp", "vsg-varnish-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o755)
	t.Cleanup(func() { os.RemoveAll(work) })
	file := filepath.Join(work, "gateway.vcl")
	if err := os.WriteFile(file, []byte(strings.Replace(string(vcl), port, `.port = "`+u.Port()+`";`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(p)
	args := []string{"-F", "-a", addr, "-f", file, "-n", filepath.Join(work, "n"), "-T", "none",
		"-s", "malloc,256m", "-p", "thread_pool_min=" + strconv.Itoa(max(threads, 50)), "-p", "thread_pool_max=5000"}
	// VSG_VARNISH_PARAMS="name=value …" adds varnishd parameters, for
	// trying the proxy's tuning in the cache benchmark.
	for _, p := range strings.Fields(os.Getenv("VSG_VARNISH_PARAMS")) {
		args = append(args, "-p", p)
	}
	cmd := exec.Command(varnishd, args...)
	c := &cacheProxy{url: "http://" + addr, cmd: cmd, log: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	go func() { cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		// The manager and its cache process: the whole process group.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
		if t.Failed() {
			t.Logf("varnishd:\n%s", c.log.String())
		}
	})
	eventually(t, 30*time.Second, "varnishd answers", func() error {
		select {
		case <-c.done:
			t.Fatalf("varnishd exited: %s", c.log.String())
		default:
		}
		resp, err := http.Get(c.url + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("/healthz through varnish: %d", resp.StatusCode)
		}
		return nil
	})
	return c
}

// cpuTicks is the CPU time (clock ticks of 10 ms) Varnish's processes
// have used so far.
func (c *cacheProxy) cpuTicks() int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// Fields after the command: pgrp is the 3rd; utime and stime the
		// 12th and 13th.
		if len(f) < 13 || f[2] != strconv.Itoa(c.pid) {
			continue
		}
		u, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		n += u + st
	}
	return n
}
