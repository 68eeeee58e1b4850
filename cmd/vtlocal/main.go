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

func fail(err error) {
	fmt.Fprintf(os.Stderr, "vtlocal: %v\n", err)
	os.Exit(1)
}
