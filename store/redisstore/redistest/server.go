package redistest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a private redis-server started for the test binary.
type redisServer struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
	url  string
}

// findRedisServer returns the redis-server binary to use, or "".
func findRedisServer() string {
	if p := os.Getenv("VSG_REDIS_SERVER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	return ""
}

// startRedis starts bin on a free port in dir. Picking a free port and
// binding it are not atomic, so a start that fails (port taken meanwhile)
// is retried on another port.
func startRedis(bin, dir string) (*redisServer, error) {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		srv, err := tryStart(bin, dir, port)
		if err == nil {
			return srv, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tryStart(bin, dir string, port int) (*redisServer, error) {
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	srv := &redisServer{cmd: cmd, done: make(chan struct{}), log: &log,
		url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	go func() { _ = cmd.Wait(); close(srv.done) }()

	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-srv.done:
			return nil, fmt.Errorf("redis-server exited during startup:\n%s", log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return srv, nil
		}
		if time.Now().After(deadline) {
			srv.stop()
			return nil, fmt.Errorf("redis-server not answering on port %d: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}
