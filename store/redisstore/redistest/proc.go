package redistest

import (
	"context"
	"fmt"
	"github.com/vstream-gateway/vstream-gateway/internal/syncbuf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server process (a data node or a Sentinel) started by
// a test and stopped when it ends.
type Node struct {
	Port int
	dir  string
	opts NodeOptions
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncbuf.Buffer
	c    *redis.Client
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Client returns the node's plain client (one per node, closed when the
// test that started the node ends). tb is unused but keeps call sites
// uniform with the other helpers.
func (n *Node) Client(testing.TB) *redis.Client { return n.c }

// Log is what the server printed.
func (n *Node) Log() string { return n.log.String() }

// Binary returns the redis-server binary, or skips tb with the reason.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin := findRedisServer()
	if bin == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("redis-server not found (CI is set, so the Redis tests may not be skipped)")
		}
		tb.Skip("redis-server not found: install it or set VSG_REDIS_SERVER to its path")
	}
	return bin
}

// NodeOptions say how to start a node.
type NodeOptions struct {
	// Args follow the configuration file; --port, --bind, --dir and
	// --daemonize are set by StartNode.
	Args []string
	// Conf, if not empty, is written to a configuration file in the node's
	// directory and given first (a Sentinel needs one it can rewrite).
	Conf string
	// Bus asks for a port whose Cluster bus port (port + 10000) is free.
	Bus bool
}

// StartNode starts redis-server in a directory of its own and waits until
// it answers PING.
func StartNode(tb testing.TB, o NodeOptions) *Node {
	tb.Helper()
	n, err := tryStartNode(tb, o)
	if err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	return n
}

func tryStartNode(tb testing.TB, o NodeOptions) (*Node, error) {
	tb.Helper()
	bin := Binary(tb)
	var lastErr error
	for range 5 {
		port, err := pickPort(o.Bus)
		if err != nil {
			tb.Fatal(err)
		}
		dir := filepath.Join(tb.TempDir(), "redis-"+strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		n := &Node{Port: port, dir: dir, opts: o}
		if err := n.start(bin); err != nil {
			lastErr = err
			continue
		}
		n.c = redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 2 * time.Second, PoolSize: 2})
		tb.Cleanup(func() { n.Kill(); _ = n.c.Close() })
		return n, nil
	}
	return nil, lastErr
}

// Dir is the node's working directory (configuration, AOF).
func (n *Node) Dir() string { return n.dir }

func (n *Node) start(bin string) error {
	var full []string
	if n.opts.Conf != "" {
		// Written once: a Sentinel rewrites it with what it learned, and
		// a restart must find that.
		conf := filepath.Join(n.dir, "node.conf")
		if _, err := os.Stat(conf); err != nil {
			if err := os.WriteFile(conf, []byte(n.opts.Conf), 0o644); err != nil {
				return err
			}
		}
		full = append(full, conf)
	}
	full = append(append(full, n.opts.Args...),
		"--port", strconv.Itoa(n.Port), "--bind", "127.0.0.1", "--dir", n.dir, "--daemonize", "no")
	cmd := exec.Command(bin, full...)
	if n.log == nil {
		n.log = &syncbuf.Buffer{}
	}
	cmd.Stdout, cmd.Stderr = n.log, n.log
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited during startup:\n%s", n.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		// LOADING: listening, restoring its data (an AOF) — up.
		if err == nil || redis.HasErrorPrefix(err, "LOADING") {
			return nil
		}
		if time.Now().After(deadline) {
			n.Kill()
			return fmt.Errorf("redis-server not answering on port %d: %w", n.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the node at once (SIGKILL).
func (n *Node) Kill() { n.signal(syscall.SIGKILL) }

// Stop stops the node as an operator does (SIGTERM: an AOF is flushed).
func (n *Node) Stop() { n.signal(syscall.SIGTERM) }

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pause stops the process without closing its sockets (SIGSTOP): the port
// still accepts connections but nothing answers, as with a server that is
// partitioned away or hung.
func (n *Node) Pause() { n.sendOnly(syscall.SIGSTOP) }

// Resume continues a paused node (SIGCONT).
func (n *Node) Resume() { n.sendOnly(syscall.SIGCONT) }

func (n *Node) sendOnly(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

// Restart starts the stopped node again on the same port and directory,
// with the same arguments.
func (n *Node) Restart(tb testing.TB) {
	tb.Helper()
	var err error
	for range 50 { // the port may linger a moment after the kill
		if err = n.start(Binary(tb)); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("restart redis-server on %d: %v", n.Port, err)
}

// pickPort returns a free loopback port (with busPort, one whose Cluster
// bus port is free as well). Choosing and binding are not atomic; callers
// retry a start that fails.
func pickPort(busPort bool) (int, error) {
	for range 100 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if !busPort {
			return p, nil
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port pair for a cluster node")
}

// WaitFor polls cond every 50 ms until it holds, failing tb after timeout.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
