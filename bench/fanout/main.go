// Command fanout (make bench-fanout) compares, on one machine and in one
// run, the gateway with Centrifugo fed by a VStream publisher: for each K,
// K WebSocket readers of rows written at the same rate. It starts each
// side's processes itself (the gateway alone, then Centrifugo and its
// publisher), runs vsg-load against them, stops them, and prints the two
// side by side with their ratios.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	bin, vitessBin, out string
	ks, idleKs          []int
	rate                float64
	duration            time.Duration
	gwAddr, cfPort      string
	extra               []string
	// The cluster's addresses (another cluster than the default one:
	// vtlocal's -port-offset).
	mysql, vtgate, vtgateVars, vtctld string
}

func main() {
	var c config
	var ks, extra string
	flag.StringVar(&c.bin, "bin", ".bench/bin", "directory with vstream-gateway, vsg-load, vsg-centrifugo-pub and centrifugo")
	flag.StringVar(&c.vitessBin, "vitess-bin", ".vitess/bin", "directory with vtctldclient")
	flag.StringVar(&c.out, "out", ".bench/fanout", "directory for logs and JSON reports")
	flag.StringVar(&ks, "k", "1 100 1000", "reader counts")
	flag.Float64Var(&c.rate, "rate", 200, "rows per second")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "writing time per run")
	flag.StringVar(&c.gwAddr, "gateway-addr", "127.0.0.1:18080", "gateway listen address")
	flag.StringVar(&c.cfPort, "centrifugo-port", "18000", "Centrifugo port (on 127.0.0.1)")
	flag.StringVar(&extra, "load-flags", "", "more vsg-load flags for every run (space-separated)")
	var idleKs string
	flag.StringVar(&idleKs, "idle-k", "", "connection counts for idle-memory runs (vsg-load --idle), after the load runs")
	flag.StringVar(&c.mysql, "mysql", "127.0.0.1:15306", "vtgate MySQL address (the writer)")
	flag.StringVar(&c.vtgate, "vtgate", "localhost:15991", "vtgate gRPC address (the gateway, the publisher)")
	flag.StringVar(&c.vtgateVars, "vtgate-vars", "http://localhost:15001/debug/vars", "vtgate's /debug/vars")
	flag.StringVar(&c.vtctld, "vtctld", "localhost:15999", "vtctld gRPC address")
	flag.Parse()
	var err error
	if c.ks, err = counts(ks); err == nil {
		c.idleKs, err = counts(idleKs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(2)
	}
	c.extra = strings.Fields(extra)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(c, log); err != nil {
		log.Error("bench-fanout failed", "err", err)
		os.Exit(1)
	}
}

// counts parses a space-separated list of positive counts.
func counts(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(list) {
		k, err := strconv.Atoi(f)
		if err != nil || k <= 0 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, k)
	}
	return out, nil
}

func run(c config, log *slog.Logger) error {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "vsg-fanout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{c: c, log: log, tmp: tmp, stream: "load", secret: randHex(32)}
	b.common = append([]string{"--rate", fmt.Sprint(c.rate), "--duration", c.duration.String(), "--stream", b.stream,
		"--ready-timeout", "30s", "--vtctldclient", filepath.Join(c.vitessBin, "vtctldclient"),
		"--mysql", c.mysql, "--vtgate-vars", c.vtgateVars, "--vtctld", c.vtctld}, c.extra...)
	streams := filepath.Join(tmp, "streams.yaml")
	os.WriteFile(streams, []byte("streams:\n  - name: "+b.stream+"\n    keyspace: customer\n    tables: [customer]\n    start: now\n"), 0o644)
	b.streams = streams
	mint := exec.Command(filepath.Join(c.bin, "vstream-gateway"), "token", "--sub", "load", "--streams", b.stream, "--ttl", "6h")
	mint.Env = append(os.Environ(), "VSG_JWT_SECRET="+b.secret)
	tok, err := mint.Output()
	if err != nil {
		return fmt.Errorf("mint token: %w", err)
	}
	b.token = strings.TrimSpace(string(tok))

	// For each K, the gateway then Centrifugo, each side's processes
	// started for the run and stopped after it: each run has the machine
	// and the cluster to itself, starts from a fresh process, and adjacent
	// runs see the shared machine in about the same state.
	reports := map[string]map[int]*report{"gateway": {}, "centrifugo": {}}
	for _, k := range c.ks {
		for _, side := range []struct {
			name string
			run  func(int) (*report, error)
		}{{"gateway", b.gateway}, {"centrifugo", b.centrifugo}} {
			r, err := retry(log, c, side.name, k, side.run)
			if err != nil {
				return err
			}
			reports[side.name][k] = r
		}
	}
	// Idle memory: K connections, nothing written (vsg-load --idle).
	idle := map[string]map[int]*report{"gateway": {}, "centrifugo": {}}
	b.idle = true
	for _, k := range c.idleKs {
		for _, side := range []struct {
			name string
			run  func(int) (*report, error)
		}{{"gateway", b.gateway}, {"centrifugo", b.centrifugo}} {
			r, err := retry(log, c, side.name, k, side.run)
			if err != nil {
				return err
			}
			idle[side.name][k] = r
		}
	}
	table(os.Stdout, c, reports)
	idleTable(os.Stdout, c, idle)
	return nil
}

type bench struct {
	c                          config
	log                        *slog.Logger
	tmp, stream, secret, token string
	streams                    string
	common                     []string
	idle                       bool // the runs measure idle connections
}

// gateway runs K readers against a gateway started for the run, with
// authentication on as in production: one token for every reader, no
// per-token connection cap, an embedded store of its own.
func (b *bench) gateway(k int) (*report, error) {
	data, _ := os.MkdirTemp(b.tmp, "gw-")
	gw, err := start(filepath.Join(b.c.out, fmt.Sprintf("gateway-%d.log", k)), []string{"VSG_JWT_SECRET=" + b.secret},
		filepath.Join(b.c.bin, "vstream-gateway"), "--listen", b.c.gwAddr, "--vtgate", b.c.vtgate, "--data-dir", data, "--streams-file", b.streams,
		"--max-conns-per-token", "0", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	defer stop(gw)
	if err := waitHTTP("http://"+b.c.gwAddr+"/readyz", 60*time.Second); err != nil {
		return nil, err
	}
	return b.load("gateway", k, append([]string{"--target", "gateway", "--url", "http://" + b.c.gwAddr,
		"--gateway-pid", strconv.Itoa(gw.Process.Pid)}, b.common...), []string{"VSG_TOKEN=" + b.token})
}

// centrifugo runs K readers against Centrifugo and its publisher, started
// for the run. Channel history and recovery are on, so that a
// reconnecting client gets what it missed.
func (b *bench) centrifugo(k int) (*report, error) {
	apiKey, hmac := randHex(16), randHex(32)
	cfg := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": mustAtoi(b.c.cfPort)},
		"log":         map[string]any{"level": "warn"},
		"client":      map[string]any{"token": map[string]any{"hmac_secret_key": hmac}, "allowed_origins": []string{"http://127.0.0.1"}},
		"http_api":    map[string]any{"key": apiKey},
		"channel": map[string]any{"without_namespace": map[string]any{
			"allow_subscribe_for_client": true, "history_size": 100000, "history_ttl": "600s", "force_recovery": true}},
		"health":      map[string]any{"enabled": true},
		"usage_stats": map[string]any{"disabled": true},
	}
	cb, _ := json.MarshalIndent(cfg, "", "  ")
	cfgFile := filepath.Join(b.tmp, "centrifugo.json")
	os.WriteFile(cfgFile, cb, 0o600)
	cf, err := start(filepath.Join(b.c.out, fmt.Sprintf("centrifugo-%d.log", k)), nil, filepath.Join(b.c.bin, "centrifugo"), "-c", cfgFile)
	if err != nil {
		return nil, err
	}
	defer stop(cf)
	api := "http://127.0.0.1:" + b.c.cfPort
	if err := waitHTTP(api+"/health", 60*time.Second); err != nil {
		return nil, err
	}
	ready := filepath.Join(b.tmp, fmt.Sprintf("publisher-%d.ready", k))
	pub, err := start(filepath.Join(b.c.out, fmt.Sprintf("publisher-%d.log", k)), []string{"VSG_CENTRIFUGO_API_KEY=" + apiKey},
		filepath.Join(b.c.bin, "vsg-centrifugo-pub"), "--api", api+"/api", "--vtgate", b.c.vtgate, "--channel", b.stream, "--stream", b.stream, "--ready-file", ready)
	if err != nil {
		return nil, err
	}
	defer stop(pub)
	if err := waitFile(ready, 60*time.Second); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	return b.load("centrifugo", k, append([]string{"--target", "centrifugo", "--url", api,
		"--server-pid", strconv.Itoa(cf.Process.Pid), "--aux-pid", strconv.Itoa(pub.Process.Pid)}, b.common...),
		[]string{"VSG_CENTRIFUGO_SECRET=" + hmac})
}

// errNoReport: the run could not start (the cluster was away).
var errNoReport = errors.New("no report")

// retry runs one side's run again, with fresh processes, when it could not
// start: the cluster is shared and may be being recreated; wait until
// vtgate serves again.
func retry(log *slog.Logger, c config, side string, k int, run func(int) (*report, error)) (*report, error) {
	for attempt := 1; ; attempt++ {
		r, err := run(k)
		if err == nil || attempt == 3 {
			return r, err
		}
		log.Warn("run did not start; waiting for the cluster", "side", side, "k", k, "err", err)
		if err := waitTCP(c.mysql, 10*time.Minute); err != nil {
			return nil, err
		}
	}
}

// waitFile polls until path exists.
func waitFile(path string, limit time.Duration) error {
	end := time.Now().Add(limit)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(end) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		<-t.C
	}
	return fmt.Errorf("%s not created within %v", path, limit)
}

// load runs vsg-load once and reads its JSON report. A run that lost rows
// exits non-zero but still reports: that is a result, not a failure of the
// bench.
func (b *bench) load(target string, k int, args, env []string) (*report, error) {
	return load(b.c, b.log, target, k, b.idle, args, env)
}

func load(c config, log *slog.Logger, target string, k int, idle bool, args, env []string) (*report, error) {
	name := fmt.Sprintf("%s-%d.json", target, k)
	if idle {
		name = fmt.Sprintf("%s-idle-%d.json", target, k)
		args = append(args, "--idle", "--idle-hold", "10s", "--ready-timeout", "120s")
	}
	out := filepath.Join(c.out, name)
	os.Remove(out)
	args = append(args, "--ws", strconv.Itoa(k), "--json", out)
	log.Info("run", "target", target, "k", k)
	cmd := exec.Command(filepath.Join(c.bin, "vsg-load"), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Warn("vsg-load reported a failure", "target", target, "k", k, "err", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, errNoReport
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func start(logFile string, env []string, bin string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return cmd, nil
}

// stop ends a process this bench started: SIGTERM, then SIGKILL after 15 s.
func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// waitTCP polls addr until it accepts a connection.
func waitTCP(addr string, limit time.Duration) error {
	end := time.Now().Add(limit)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for time.Now().Before(end) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		<-t.C
	}
	return fmt.Errorf("%s not back within %v", addr, limit)
}

// waitHTTP polls url until it answers 200.
func waitHTTP(url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v", url, limit)
		case <-t.C:
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
