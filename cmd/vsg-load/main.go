// Command vsg-load measures what K concurrent readers cost a change-stream
// server: the gateway (WebSocket, SSE, pull, mixable) or Centrifugo fed by
// a VStream publisher. It writes rows at a fixed rate through vtgate, checks
// that every reader receives each row exactly once (across reconnect storms
// too), records commit→reader latency, and reports the server's RSS and CPU,
// the VStreams vtgate serves and the binlog dump threads on each primary.
// See "Load tool" in README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	target, url, stream, token, cfSecret string
	ws, sse, pull                        int
	batchTxn                             bool
	rate                                 float64
	writers                              int
	duration, readyTimeout, drain        time.Duration
	drainMax                             time.Duration
	pullWait                             time.Duration
	pullURL                              string
	pullInStep                           bool
	mysql, mysqlUser, keyspace, table    string
	reconnectFrac                        float64
	reconnectEvery                       time.Duration
	connectConcurrency                   int
	serverPid, auxPid                    int
	serverName                           string
	varsURL, vtctldAddr, vtctldclient    string
	idle, settle                         bool
	idleHold                             time.Duration
	jsonOut, run, logLevel               string
	cpuProfile                           string
}

func parseFlags(args []string, getenv func(string) string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("vsg-load", flag.ContinueOnError)
	fs.StringVar(&c.target, "target", "gateway", "gateway or centrifugo")
	fs.StringVar(&c.url, "url", "", "server URL (default http://127.0.0.1:8080 for the gateway, http://127.0.0.1:8000 for Centrifugo)")
	fs.StringVar(&c.stream, "stream", "customers", "gateway stream, or Centrifugo channel")
	fs.StringVar(&c.token, "token", getenv("VSG_TOKEN"), "bearer token for the gateway (env VSG_TOKEN)")
	fs.StringVar(&c.cfSecret, "centrifugo-secret", getenv("VSG_CENTRIFUGO_SECRET"), "Centrifugo client.token.hmac_secret_key, to mint connection JWTs (env VSG_CENTRIFUGO_SECRET)")
	fs.IntVar(&c.ws, "ws", 0, "WebSocket readers")
	fs.IntVar(&c.sse, "sse", 0, "SSE readers (gateway)")
	fs.IntVar(&c.pull, "pull", 0, "HTTP long-poll readers (gateway)")
	fs.BoolVar(&c.batchTxn, "batch-txn", false, "gateway WebSocket readers ask for batch=txn")
	fs.Float64Var(&c.rate, "rate", 200, "rows written per second (one row per transaction)")
	fs.IntVar(&c.writers, "writers", 4, "writer connections to vtgate (each sends one INSERT at a time)")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "how long the writer writes")
	fs.DurationVar(&c.readyTimeout, "ready-timeout", 60*time.Second, "longest wait for readers to know their position before writing")
	fs.DurationVar(&c.drain, "drain", 10*time.Second, "after the writer stops, how long readers may receive nothing before missing rows count as lost")
	fs.DurationVar(&c.drainMax, "drain-max", 2*time.Minute, "longest wait after the writer stops for rows still in flight")
	fs.DurationVar(&c.pullWait, "pull-wait", 10*time.Second, "pull readers' long-poll wait")
	fs.StringVar(&c.pullURL, "pull-url", "", "base URL pull readers ask (a caching proxy in front of the gateway; default --url)")
	fs.BoolVar(&c.pullInStep, "pull-in-step", false, "pull readers all start from one cursor (the live end's, asked once), as pollers in step")
	fs.StringVar(&c.mysql, "mysql", "127.0.0.1:15306", "vtgate MySQL address")
	fs.StringVar(&c.mysqlUser, "mysql-user", "root", "MySQL user")
	fs.StringVar(&c.keyspace, "keyspace", "customer", "keyspace written to")
	fs.StringVar(&c.table, "table", "customer", "table written to (email column; the key comes from its sequence)")
	fs.Float64Var(&c.reconnectFrac, "reconnect-frac", 0, "fraction of readers that reconnect from their position every --reconnect-every")
	fs.DurationVar(&c.reconnectEvery, "reconnect-every", time.Second, "reconnect storm period")
	fs.IntVar(&c.connectConcurrency, "connect-concurrency", 64, "readers connecting at once at the start")
	fs.IntVar(&c.serverPid, "server-pid", 0, "pid of the server (default: found by --server-name)")
	fs.IntVar(&c.serverPid, "gateway-pid", 0, "alias of --server-pid")
	fs.StringVar(&c.serverName, "server-name", "", "command name of the server (default vstream-gateway or centrifugo)")
	fs.IntVar(&c.auxPid, "aux-pid", 0, "pid of a process measured beside the server (Centrifugo's publisher)")
	fs.StringVar(&c.varsURL, "vtgate-vars", "http://localhost:15001/debug/vars", "vtgate's /debug/vars")
	fs.StringVar(&c.vtctldAddr, "vtctld", "localhost:15999", "vtctld gRPC address")
	fs.StringVar(&c.vtctldclient, "vtctldclient", defaultVtctldclient(), "vtctldclient binary")
	fs.BoolVar(&c.settle, "settle", true, "before measuring, rotate the keyspace's binlogs so that dump threads left by earlier VStreams exit")
	fs.BoolVar(&c.idle, "idle", false, "idle-memory mode: open the readers, write nothing, report RSS per connection")
	fs.DurationVar(&c.idleHold, "idle-hold", 5*time.Second, "idle mode: how long the connections are held before RSS is read")
	fs.StringVar(&c.jsonOut, "json", "", "also write the report as JSON to this file (- for stdout, replacing the text)")
	fs.StringVar(&c.run, "run", "", "run id in the rows written (default: random)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn, error")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the load tool's own CPU profile to this file (is the tool the bottleneck?)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// validate fills the target's defaults and refuses what the tool cannot
// run, and any address off this machine.
func (c *config) validate() error {
	switch c.target {
	case "gateway":
		c.url = cmp(c.url, "http://127.0.0.1:8080")
		c.serverName = cmp(c.serverName, "vstream-gateway")
	case "centrifugo":
		c.url = cmp(c.url, "http://127.0.0.1:8000")
		c.serverName = cmp(c.serverName, "centrifugo")
		if c.sse+c.pull > 0 {
			return errors.New("--target centrifugo takes WebSocket readers only (--ws)")
		}
		if c.cfSecret == "" {
			return errors.New("--target centrifugo needs --centrifugo-secret")
		}
	default:
		return fmt.Errorf("--target %q: gateway or centrifugo", c.target)
	}
	if c.ws+c.sse+c.pull <= 0 {
		return errors.New("no readers: give --ws, --sse and/or --pull")
	}
	if c.rate <= 0 || c.writers <= 0 || c.duration <= 0 || c.reconnectFrac < 0 || c.reconnectFrac > 1 {
		return errors.New("--rate, --writers, --duration must be positive, --reconnect-frac within [0,1]")
	}
	if c.run == "" {
		c.run = strconv.FormatInt(time.Now().UnixNano()%(36*36*36*36*36*36), 36)
	}
	if strings.ContainsAny(c.run, "-@\"\\") {
		return errors.New("--run must not contain - @ \" \\")
	}
	// The tool sends traffic to this machine only.
	u, err := url.Parse(c.url)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	vu, err := url.Parse(c.varsURL)
	if err != nil {
		return fmt.Errorf("--vtgate-vars: %w", err)
	}
	for _, hp := range []string{u.Host, c.mysql, vu.Host, c.vtctldAddr} {
		if err := loopbackOnly(hp); err != nil {
			return err
		}
	}
	return nil
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// defaultVtctldclient is the binary `make cluster-up` builds, else the one
// on PATH.
func defaultVtctldclient() string {
	if _, err := os.Stat(".vitess/bin/vtctldclient"); err == nil {
		return ".vitess/bin/vtctldclient"
	}
	if p, err := exec.LookPath("vtctldclient"); err == nil {
		return p
	}
	return ".vitess/bin/vtctldclient"
}

// loopbackOnly refuses any address that is not on this machine's loopback.
func loopbackOnly(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("%s: %w", hostport, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("%s resolves to %s: only loopback addresses are allowed", hostport, ip)
		}
	}
	return nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsg-load:", err)
		os.Exit(2)
	}
	var level slog.Level
	level.UnmarshalText([]byte(cfg.logLevel))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "vsg-load: cpu profile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := runLoad(ctx, cfg, log)
	pprof.StopCPUProfile() // before an exit below
	if err != nil {
		log.Error("run failed", "err", err)
		os.Exit(1)
	}
	if cfg.jsonOut != "-" {
		rep.text(os.Stdout)
	}
	if cfg.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		b = append(b, '\n')
		if cfg.jsonOut == "-" {
			os.Stdout.Write(b)
		} else if err := os.WriteFile(cfg.jsonOut, b, 0o644); err != nil {
			log.Error("write report", "err", err)
			os.Exit(1)
		}
	}
	if !rep.ok() {
		log.Error("rows were lost or duplicated, or readers failed", "lost", rep.Lost, "dups", rep.Dups, "failed_readers", rep.ReadersFailed)
		os.Exit(1)
	}
}
