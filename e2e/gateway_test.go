package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vstream-gateway/vstream-gateway/internal/syncbuf"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
)

// gateway is a running gateway process.
type gateway struct {
	t    *testing.T
	args []string
	url  string
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	// past is the log of the processes before this one (a gateway started
	// again): kept for the saved log of a failed test.
	past string
	done chan struct{}
	// wrap runs the binary through a command (its arguments follow), env
	// adds to its environment: a memory limit (bigtxn_test.go).
	wrap []string
	env  []string
}

// startGateway runs the binary on a free port with the given extra flags
// (default: the test Redis under a fresh key prefix is not needed because
// every test uses its own stream names).
func startGateway(t *testing.T, extra ...string) *gateway {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--vtgate", cluster.VtgateAddr(),
		"--log-level", "debug",
	}, extra...)
	if !hasAuthFlag(extra) {
		args = append(args, "--insecure-no-auth")
	}
	g := &gateway{t: t, args: args, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	g.start()
	t.Cleanup(func() { g.stop(syscall.SIGTERM) })
	return g
}

// hasAuthFlag reports whether flags configure authentication; otherwise
// the gateway runs with --insecure-no-auth (it refuses to start with
// neither).
func hasAuthFlag(flags []string) bool {
	for _, f := range flags {
		if f == "--jwt-secret" || f == "--jwks-url" || f == "--insecure-no-auth" {
			return true
		}
	}
	return false
}

// withRedis points a gateway at a Redis database of the test's own: the
// gateways of one test share it, and what earlier tests left there
// (streams, named subscribers, webhooks) does not reach it. A reshard
// bridges every named subscriber the store knows, and the old shards may
// be deleted seconds after the switch: another test's leftovers would
// take the bridges' turns.
func withRedis(t *testing.T) []string { return []string{"--redis", redisFor(t)} }

var redisDBs struct {
	sync.Mutex
	next  int
	owner map[string]int
}

// redisFor returns the URL of the Redis database of t's top-level test
// (held until the test, or the subtest that asked first, ends), handing
// out databases 1 to 15 in turn (0 is left to the tests that read
// redisURL), each flushed when handed out.
func redisFor(t *testing.T) string {
	t.Helper()
	root, _, _ := strings.Cut(t.Name(), "/")
	redisDBs.Lock()
	defer redisDBs.Unlock()
	if redisDBs.owner == nil {
		redisDBs.owner = map[string]int{}
	}
	db, ok := redisDBs.owner[root]
	if !ok {
		db = redisDBs.next%15 + 1
		redisDBs.next++
		for name, d := range redisDBs.owner {
			if d == db {
				delete(redisDBs.owner, name)
			}
		}
		redisDBs.owner[root] = db
		// The next run of the same test (-count) gets a fresh database.
		t.Cleanup(func() {
			redisDBs.Lock()
			defer redisDBs.Unlock()
			if redisDBs.owner[root] == db {
				delete(redisDBs.owner, root)
			}
		})
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			t.Fatal(err)
		}
		opts.DB = db
		c := redis.NewClient(opts)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.FlushDB(ctx).Err(); err != nil {
			t.Fatalf("flushing Redis database %d: %v", db, err)
		}
	}
	return strings.TrimSuffix(redisURL, "/0") + "/" + strconv.Itoa(db)
}

func withDataDir(t *testing.T) []string {
	return []string{"--data-dir", filepath.Join(t.TempDir(), "data")}
}

func (g *gateway) start() {
	g.t.Helper()
	if g.log != nil {
		g.past += g.log.String() + "--- the gateway is started again ---\n"
	}
	g.log = &syncbuf.Buffer{}
	g.cmd = exec.Command(gatewayBin, g.args...)
	if len(g.wrap) > 0 {
		g.cmd = exec.Command(g.wrap[0], append(append(g.wrap[1:len(g.wrap):len(g.wrap)], gatewayBin), g.args...)...)
	}
	if len(g.env) > 0 {
		g.cmd.Env = append(os.Environ(), g.env...)
	}
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.done = make(chan struct{})
	go func() { g.cmd.Wait(); close(g.done) }()
	probe := &http.Client{Timeout: 5 * time.Second}
	err := eventuallyCtx(context.Background(), 30*time.Second, "the gateway to be ready", func() error {
		select {
		case <-g.done:
			return wait.Abort(errors.New("the gateway exited at start-up"))
		default:
		}
		resp, err := probe.Get(g.url + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		g.t.Fatalf("%v\n%s", err, g.log.String())
	}
}

// alive reports whether the process runs (it was not stopped or killed).
func (g *gateway) alive() bool {
	if g.done == nil {
		return false
	}
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// stop signals the process and waits for it to exit.
func (g *gateway) stop(sig syscall.Signal) {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	select {
	case <-g.done:
		return
	default:
	}
	g.cmd.Process.Signal(sig)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Kill()
		<-g.done
		g.t.Errorf("gateway did not exit within 30s of %v", sig)
	}
	if os.Getenv("VSG_E2E_LOGS") != "" {
		g.t.Logf("gateway log:\n%s", g.log.String())
	} else if g.t.Failed() {
		g.t.Logf("gateway log (warnings, errors and bridges; the whole log in %s):\n%s", g.saveLog(), g.notable(100))
	}
}

// saveLog writes the gateway's whole log to a file for a failed test (it
// is too long for the test output) and returns its name.
func (g *gateway) saveLog() string {
	dir := filepath.Join(os.TempDir(), "vsg-e2e-logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(g.t.Name(), "/", "_"), time.Now().UnixNano()))
	if err := os.WriteFile(name, []byte(g.past+g.log.String()), 0o644); err != nil {
		return err.Error()
	}
	return name
}

// notable returns the last n lines of the gateway's log that say
// something went wrong, or concern bridges (what the reshard tests wait
// for).
func (g *gateway) notable(n int) string {
	var out []string
	for _, l := range strings.Split(g.past+g.log.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "bridg") {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

func (g *gateway) restart(sig syscall.Signal) {
	g.stop(sig)
	g.start()
}

// do sends a JSON request and decodes a JSON response into out (if not nil),
// returning the status.
func (g *gateway) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", b, err)
		}
	}
	if resp.StatusCode >= 300 && out == nil {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

func (g *gateway) createStream(t *testing.T, def map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out map[string]any
	status, err := g.do(ctx, "POST", "/v1/streams", def, &out)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("create stream: %d %v %v", status, out, err)
	}
}
