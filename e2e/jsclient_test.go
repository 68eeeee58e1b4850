package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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

	"github.com/golang-jwt/jwt/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
)

// jsDir is the JavaScript client's package.
const jsDir = "../clients/js"

// TestJSClient runs the JavaScript client's tests (clients/js/test, with
// node --test) against a real gateway on the local cluster. The tests
// drive the cluster through a small control server this test runs: write
// rows, SIGKILL and restart the gateway, reshard customer, mint tokens.
// The gateway reads on Redis, so that a restart keeps subscribers'
// cursors, and authenticates with JWTs, so that tokens can expire. Then
// the browser build reads the same gateway in headless Chromium.
func TestJSClient(t *testing.T) {
	needE2E(t)
	node := needNode(t)
	hold := 12 * time.Minute
	if os.Getenv("VSG_JS_SERVE") == "1" {
		hold = 50 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	js := startJSControl(t, ctx)
	if os.Getenv("VSG_JS_SERVE") == "1" {
		// For working on the client: serve the gateway and the control
		// server until the test's deadline, for node --test run by hand.
		t.Logf("VSG_URL=%s VSG_CONTROL=%s", js.g.url, js.url)
		<-ctx.Done()
		return
	}
	files, err := filepath.Glob(filepath.Join(jsDir, "test", "*.test.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests in %s/test: %v", jsDir, err)
	}
	args := []string{"--test", "--test-concurrency=1", "--test-reporter=spec", "--test-timeout=300000"}
	for _, f := range files {
		args = append(args, strings.TrimPrefix(f, jsDir+"/"))
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "VSG_URL="+js.g.url, "VSG_CONTROL="+js.url, "VSG_REQUIRE_GATEWAY=1")
	t.Run("node", func(t *testing.T) { runNode(t, cmd) })
	t.Run("browser", func(t *testing.T) { testJSBrowser(t, ctx, js) })
}

// needNode finds node and checks that the client's development packages
// are installed (make test-deps installs them).
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("the JavaScript client's tests need Node.js 20 or later (node)")
	}
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "ws")); err != nil {
		t.Fatal("the JavaScript client's packages are not installed: run make test-deps (npm ci in clients/js)")
	}
	return node
}

// runNode runs a node command, logging its output as it comes, and fails
// the test if it fails.
func runNode(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t.Log(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
}

// jsControl is the control server the JavaScript tests call.
type jsControl struct {
	t      *testing.T
	g      *authGateway
	w      *writer
	url    string
	mu     sync.Mutex
	writes map[string]context.CancelFunc // background writers by phase
	wg     sync.WaitGroup
}

func startJSControl(t *testing.T, ctx context.Context) *jsControl {
	secret := []byte(fmt.Sprintf("js-client-test-secret-%020d", time.Now().UnixNano()))
	g := startGateway(t, append(withRedis(t), "--jwt-secret", string(secret), "--jwt-audience", "vsg-e2e", "--jwt-issuer", "e2e",
		"--cors-origins", "*")...)
	c := &jsControl{t: t, g: &authGateway{gateway: g, secret: secret}, writes: map[string]context.CancelFunc{},
		w: newWriter(t, "js"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c.routes(ctx)}
	go srv.Serve(ln)
	t.Cleanup(func() {
		c.stopWriters()
		srv.Close()
	})
	c.url = "http://" + ln.Addr().String()
	return c
}

func (c *jsControl) routes(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			v = map[string]string{"error": err.Error()}
		}
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /token", func(w http.ResponseWriter, r *http.Request) {
		ttl, err := time.ParseDuration(r.URL.Query().Get("ttl"))
		if err != nil {
			ttl = time.Hour
		}
		tok, err := c.token(ttl, r.URL.Query().Get("scope"))
		reply(w, map[string]string{"token": tok}, err)
	})
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]string{"tag": c.w.tag, "gateway": c.g.url}, nil)
	})
	mux.HandleFunc("POST /insert", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		per, _ := strconv.Atoi(r.URL.Query().Get("per_txn"))
		err := c.insert(r.Context(), r.URL.Query().Get("phase"), n, max(per, 1))
		reply(w, map[string]any{"rows": c.rows(r.URL.Query().Get("phase"))}, err)
	})
	mux.HandleFunc("POST /writer/start", func(w http.ResponseWriter, r *http.Request) {
		c.startWriter(ctx, r.URL.Query().Get("phase"))
		reply(w, map[string]any{}, nil)
	})
	mux.HandleFunc("POST /writer/stop", func(w http.ResponseWriter, r *http.Request) {
		c.stopWriters()
		reply(w, map[string]any{"rows": c.rows(r.URL.Query().Get("phase"))}, nil)
	})
	mux.HandleFunc("GET /rows", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"rows": c.rows(r.URL.Query().Get("phase"))}, nil)
	})
	mux.HandleFunc("POST /gateway/kill", func(w http.ResponseWriter, r *http.Request) {
		c.g.stop(syscall.SIGKILL)
		reply(w, map[string]any{}, nil)
	})
	mux.HandleFunc("POST /gateway/start", func(w http.ResponseWriter, r *http.Request) {
		c.g.start()
		reply(w, map[string]any{}, nil)
	})
	mux.HandleFunc("POST /reshard", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w, map[string]any{}, c.reshard(r.Context(), q.Get("workflow"), q.Get("from"), q.Get("to")))
	})
	return mux
}

// token mints a token for the JavaScript tests: every stream, admin
// scope when asked (to create streams), expiring after ttl.
func (c *jsControl) token(ttl time.Duration, scope string) (string, error) {
	now := time.Now()
	cl := &auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "js", Audience: jwt.ClaimStrings{"vsg-e2e"}, Issuer: "e2e",
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)), IssuedAt: jwt.NewNumericDate(now)}, Streams: []string{"*"}, Tables: []string{"*"}, Scope: scope}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, cl).SignedString(c.g.secret)
}

// insert writes n rows of a phase in transactions of per rows each.
func (c *jsControl) insert(ctx context.Context, phase string, n, per int) error {
	for n > 0 {
		k := min(n, per)
		tx, err := c.w.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var emails []string
		for range k {
			c.w.mu.Lock()
			c.w.count++
			email := fmt.Sprintf("%s-%s-%05d@e2e", c.w.tag, phase, c.w.count)
			c.w.mu.Unlock()
			if _, err := tx.ExecContext(ctx, "insert into customer(email) values (?)", email); err != nil {
				tx.Rollback()
				return err
			}
			emails = append(emails, email)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		c.w.mu.Lock()
		c.w.rows = append(c.w.rows, emails...)
		c.w.mu.Unlock()
		n -= k
	}
	return nil
}

// startWriter inserts rows of a phase, one every 20 ms, until stopped.
// Stopping ends the loop between inserts, never cancels one in flight: a
// cancelled insert may still commit after the writer gave up on it, and
// then a reader sees a row the test does not expect. An insert that fails
// (during a reshard's switch) is settled: if it committed after all, it
// counts.
func (c *jsControl) startWriter(ctx context.Context, phase string) {
	wctx, stop := context.WithCancel(ctx)
	c.mu.Lock()
	c.writes[phase] = stop
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if err := c.w.insert(ctx, phase, 1); err != nil && ctx.Err() == nil {
				c.w.recoverAmbiguous(ctx, c.t, err)
			}
		}
	}()
}

func (c *jsControl) stopWriters() {
	c.mu.Lock()
	for p, cancel := range c.writes {
		cancel()
		delete(c.writes, p)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// rows returns the committed rows of a phase, in commit order.
func (c *jsControl) rows(phase string) []string {
	mark := "-" + phase + "-"
	out := []string{} // [] rather than null for a phase with no rows yet
	for _, e := range c.w.since(0) {
		if strings.Contains(e, mark) {
			out = append(out, e)
		}
	}
	return out
}

// reshard runs one reshard step of customer, reporting failures rather
// than failing the test from the control server's goroutine.
func (c *jsControl) reshard(ctx context.Context, workflow, from, to string) (err error) {
	if workflow == "" || from == "" || to == "" {
		return errors.New("reshard needs workflow, from and to")
	}
	start := time.Now()
	for _, step := range []func() error{
		func() error { return cluster.AddShards(ctx, "customer", strings.Split(to, ",")) },
		func() error { return cluster.Reshard(ctx, "customer", workflow, from, to) },
		func() error { return cluster.SwitchTraffic(ctx, "customer", workflow) },
		func() error { return cluster.Complete(ctx, "customer", workflow) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	c.t.Logf("reshard %s -> %s switched and completed in %v", from, to, time.Since(start).Round(time.Millisecond))
	return nil
}
