// Package e2e runs the gateway binary against a real local Vitess cluster
// (vtlocal) and a real Redis. It is skipped unless VSG_E2E=1; `make test`
// sets it after bringing the cluster up.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
	"github.com/vstream-gateway/vstream-gateway/vtlocal"
)

var (
	gatewayBin string
	redisURL   string
	cluster    *vtlocal.Cluster
)

func TestMain(m *testing.M) {
	if os.Getenv("VSG_E2E") != "1" {
		os.Exit(skipAll(m))
	}
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "vsg-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)

	gatewayBin = filepath.Join(tmp, "vstream-gateway")
	build := exec.CommandContext(ctx, "go", "build", "-o", gatewayBin, "../cmd/vstream-gateway")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("build gateway: %w", err)
	}

	opts := []vtlocal.Option{vtlocal.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	// A private cluster beside the shared one (its own data root, every
	// port shifted), for running two suites at once.
	if off := os.Getenv("VSG_E2E_PORT_OFFSET"); off != "" {
		n, err := strconv.Atoi(off)
		if err != nil {
			return 0, fmt.Errorf("VSG_E2E_PORT_OFFSET: %w", err)
		}
		opts = append(opts, vtlocal.WithPortOffset(n), vtlocal.WithDataRoot(vtlocal.DefaultDataRoot+"-"+off))
	}
	cluster, err = vtlocal.New(opts...)
	if err != nil {
		return 0, err
	}
	if err := clearVtgateStall(); err != nil {
		return 0, err
	}
	if os.Getenv("VSG_SOAK") == "1" && os.Getenv("VSG_E2E_PORT_OFFSET") != "" {
		// The soak's private cluster is made anew for every run: a failed
		// run leaves it resharded, its tables moved or a workflow half
		// done, where Up would resume rather than start over, and every
		// run leaves journals (soakCluster).
		if err := cluster.Down(ctx); err != nil {
			return 0, fmt.Errorf("cluster down: %w", err)
		}
	}
	if err := cluster.Up(ctx); err != nil {
		return 0, fmt.Errorf("cluster up: %w", err)
	}

	stopRedis, url, err := startRedis(ctx, tmp)
	if err != nil {
		return 0, err
	}
	defer stopRedis()
	redisURL = url
	code := m.Run()
	if markerDB.db != nil {
		markerDB.db.Close()
	}
	// Every client, receiver and gateway a test starts must be gone when
	// it ends. Not counted: keep-alive connections to the cluster's
	// daemons (vtlocal asks them over HTTP), closed here; the reapers of
	// cluster daemons started by a test that recreated the cluster, which
	// run on with it; glog's flush daemon (imported by Vitess, started at
	// init, cannot be stopped).
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(append(leaktest.Ignored(),
			goleak.IgnoreAnyFunction("github.com/vstream-gateway/vstream-gateway/vtlocal.trackChild.func1"))...); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: goroutines left behind by the tests:", err)
			code = 1
		}
	}
	return code, nil
}

// startRedis runs a private redis-server for the tests, unless
// VSG_TEST_REDIS names one.
func startRedis(ctx context.Context, dir string) (func(), string, error) {
	if u := os.Getenv("VSG_TEST_REDIS"); u != "" {
		return func() {}, u, nil
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start redis-server: %w", err)
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	err = eventuallyCtx(ctx, 10*time.Second, "redis-server to listen on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		stop()
		return nil, "", err
	}
	return stop, "redis://" + addr + "/0", nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// needFaults skips a fault test that is too slow or intrusive for every
// run unless VSG_FAULTS=1 (make test-faults).
func needFaults(t *testing.T) {
	t.Helper()
	needE2E(t)
	if os.Getenv("VSG_FAULTS") != "1" {
		t.Skip("fault test: VSG_FAULTS is not 1 (make test-faults runs it)")
	}
}

func needE2E(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skip("end-to-end test: VSG_E2E is not 1 (make test sets it and brings the cluster up)")
	}
}
