// Command vtlocal manages the local Vitess cluster used for development and
// end-to-end tests. See vtlocal/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vstream-gateway/vstream-gateway/vtlocal"
)

const usage = `usage: go run ./cmd/vtlocal [flags] <verb> [args]

verbs:
  up                                   install packages and build binaries if needed, then
                                       bring the cluster up (idempotent; quick when already up)
  down                                 stop every process and delete the data root
  status                               processes (pid, ports) and keyspaces/shards/tablets
  binaries                             build the Vitess binaries if missing or outdated
  add-shards KEYSPACE SHARDS           start a primary tablet per new shard, e.g. customer -80,80-
  reshard KEYSPACE WORKFLOW FROM TO    create a Reshard workflow and wait for the copy,
                                       e.g. customer cust2cust 0 -80,80-
  movetables TARGET WORKFLOW SOURCE TABLES
                                       create a MoveTables workflow of TABLES (comma-separated)
                                       from SOURCE into TARGET and wait for the copy,
                                       e.g. commerce back customer customer,corder
  switch KEYSPACE WORKFLOW             switch reads and writes (MoveTables or Reshard)
  reverse KEYSPACE WORKFLOW            switch them back to the source (ReverseTraffic)
  cancel KEYSPACE WORKFLOW             cancel a workflow whose writes are not switched
  complete KEYSPACE WORKFLOW           complete a switched workflow (Reshard: old shards removed)
  stop-tablet UID                      stop a tablet's vttablet and mysqld (e.g. 200)
  start-tablet UID                     start it again and wait until it is primary
  add-replica KEYSPACE SHARD           start a replica tablet of a shard, replicating from its
                                       primary (uid: the primary's + 1), e.g. customer -80
  prs KEYSPACE/SHARD [TABLET]          PlannedReparentShard onto a replica (uid or alias; default:
                                       the shard's first replica)
  kill-mysqld TABLET                   SIGKILL a tablet's mysqld (and mysqld_safe); vttablet stays
  ers KEYSPACE/SHARD [TABLET]          EmergencyReparentShard onto a replica
  remove-tablet TABLET                 stop a non-primary tablet, delete it from the topology
  restart-vtgate                       restart vtgate and wait until it serves queries
  stop-vtgate                          stop vtgate and leave it stopped
  start-vtgate                         start vtgate and wait until it serves queries

flags:
`

func main() {
	fs := flag.NewFlagSet("vtlocal", flag.ExitOnError)
	dataRoot := fs.String("data-root", vtlocal.DefaultDataRoot, "cluster data directory (deleted by down)")
	binDir := fs.String("bin-dir", "", "Vitess binaries directory (default <repo>/.vitess/bin)")
	portOffset := fs.Int("port-offset", 0, "add this to every port, to run a second cluster (with its own -data-root) next to the shared one")
	timeout := fs.Duration("timeout", 15*time.Minute, "overall timeout (includes a cold binary build)")
	verbose := fs.Bool("v", false, "debug logging")
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	args := fs.Args()
	if len(args) == 0 {
		fs.Usage()
		os.Exit(2)
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := []vtlocal.Option{vtlocal.WithDataRoot(*dataRoot), vtlocal.WithLogger(logger), vtlocal.WithPortOffset(*portOffset)}
	if *binDir != "" {
		opts = append(opts, vtlocal.WithBinDir(*binDir))
	}
	c, err := vtlocal.New(opts...)
	if err != nil {
		fail(err)
	}

	// Cancel waits on Ctrl-C; the cluster daemons are detached and survive.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if err := runVerb(ctx, c, args[0], args[1:]); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "vtlocal %s: %v\n\n", args[0], err)
			fs.Usage()
			os.Exit(2)
		}
		fail(err)
	}
}

var errUsage = errors.New("wrong arguments")

func runVerb(ctx context.Context, c *vtlocal.Cluster, verb string, args []string) error {
	need := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%w: want %d, got %d", errUsage, n, len(args))
		}
		return nil
	}
	switch verb {
	case "up":
		if err := need(0); err != nil {
			return err
		}
		if err := c.EnsurePackages(ctx); err != nil {
			return err
		}
		if err := c.EnsureBinaries(ctx); err != nil {
			return err
		}
		return c.Up(ctx)
	case "down":
		if err := need(0); err != nil {
			return err
		}
		return c.Down(ctx)
	case "status":
		if err := need(0); err != nil {
			return err
		}
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		fmt.Print(st)
		return nil
	case "binaries":
		if err := need(0); err != nil {
			return err
		}
		return c.EnsureBinaries(ctx)
	case "add-shards":
		if err := need(2); err != nil {
			return err
		}
		return c.AddShards(ctx, args[0], strings.Split(args[1], ","))
	case "reshard":
		if err := need(4); err != nil {
			return err
		}
		return c.Reshard(ctx, args[0], args[1], args[2], args[3])
	case "movetables":
		if err := need(4); err != nil {
			return err
		}
		return c.MoveTables(ctx, args[0], args[1], args[2], args[3])
	case "switch":
		if err := need(2); err != nil {
			return err
		}
		return c.SwitchTraffic(ctx, args[0], args[1])
	case "reverse":
		if err := need(2); err != nil {
			return err
		}
		return c.ReverseTraffic(ctx, args[0], args[1])
	case "cancel":
		if err := need(2); err != nil {
			return err
		}
		return c.Cancel(ctx, args[0], args[1])
	case "complete":
		if err := need(2); err != nil {
			return err
		}
		return c.Complete(ctx, args[0], args[1])
	case "stop-tablet", "start-tablet":
		if err := need(1); err != nil {
			return err
		}
		uid, err := strconv.Atoi(args[0])
		if err != nil {
			return fmt.Errorf("%w: UID must be a number: %v", errUsage, err)
		}
		if verb == "stop-tablet" {
			return c.StopTablet(ctx, uid)
		}
		return c.StartTablet(ctx, uid)
	case "add-replica":
		if err := need(2); err != nil {
			return err
		}
		r, err := c.AddReplica(ctx, args[0], args[1])
		if err == nil {
			fmt.Println(r.Alias())
		}
		return err
	case "prs", "ers":
		if len(args) != 1 && len(args) != 2 {
			return fmt.Errorf("%w: want KEYSPACE/SHARD [TABLET]", errUsage)
		}
		ks, shard, ok := strings.Cut(args[0], "/")
		if !ok {
			return fmt.Errorf("%w: want KEYSPACE/SHARD, got %q", errUsage, args[0])
		}
		uid := 0
		if len(args) == 2 {
			var err error
			if uid, err = vtlocal.ParseTablet(args[1]); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		}
		reparent := c.PlannedReparent
		if verb == "ers" {
			reparent = c.EmergencyReparent
		}
		r, err := reparent(ctx, ks, shard, uid)
		if err == nil {
			fmt.Println(r.Alias())
		}
		return err
	case "kill-mysqld", "remove-tablet":
		if err := need(1); err != nil {
			return err
		}
		uid, err := vtlocal.ParseTablet(args[0])
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if verb == "kill-mysqld" {
			return c.KillMySQL(ctx, uid)
		}
		return c.RemoveTablet(ctx, uid)
	case "restart-vtgate":
		if err := need(0); err != nil {
			return err
		}
		return c.RestartVtgate(ctx)
	case "stop-vtgate":
		if err := need(0); err != nil {
			return err
		}
		return c.StopVtgate(ctx)
	case "start-vtgate":
		if err := need(0); err != nil {
			return err
		}
		return c.StartVtgate(ctx)
	default:
		return fmt.Errorf("%w: unknown verb %q", errUsage, verb)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "vtlocal: %v\n", err)
	os.Exit(1)
}
