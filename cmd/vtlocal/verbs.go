package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/vstream-gateway/vstream-gateway/vtlocal"
)

// A verb is one of the command's actions: how many arguments it takes
// (-1: it checks them itself) and what it does with them.
type verb struct {
	n   int
	run func(ctx context.Context, c *vtlocal.Cluster, args []string) error
}

// verbs are the command's actions, as the usage lists them.
var verbs = map[string]verb{
	"up": {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error {
		if err := c.EnsurePackages(ctx); err != nil {
			return err
		}
		if err := c.EnsureBinaries(ctx); err != nil {
			return err
		}
		return c.Up(ctx)
	}},
	"down": {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error { return c.Down(ctx) }},
	"status": {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error {
		st, err := c.Status(ctx)
		if err == nil {
			fmt.Print(st)
		}
		return err
	}},
	"binaries": {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error { return c.EnsureBinaries(ctx) }},
	"add-shards": {2, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return c.AddShards(ctx, a[0], strings.Split(a[1], ","))
	}},
	"reshard": {4, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return c.Reshard(ctx, a[0], a[1], a[2], a[3])
	}},
	"movetables": {4, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return c.MoveTables(ctx, a[0], a[1], a[2], a[3])
	}},
	"switch": {2, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return c.SwitchTraffic(ctx, a[0], a[1])
	}},
	"reverse": {2, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return c.ReverseTraffic(ctx, a[0], a[1])
	}},
	"cancel":       {2, func(ctx context.Context, c *vtlocal.Cluster, a []string) error { return c.Cancel(ctx, a[0], a[1]) }},
	"complete":     {2, func(ctx context.Context, c *vtlocal.Cluster, a []string) error { return c.Complete(ctx, a[0], a[1]) }},
	"stop-tablet":  onTablet(tabletUID, (*vtlocal.Cluster).StopTablet),
	"start-tablet": onTablet(tabletUID, (*vtlocal.Cluster).StartTablet),
	"add-replica": {2, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return printAlias(c.AddReplica(ctx, a[0], a[1]))
	}},
	"prs": {-1, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return reparent(ctx, c.PlannedReparent, a)
	}},
	"ers": {-1, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		return reparent(ctx, c.EmergencyReparent, a)
	}},
	"kill-mysqld":    onTablet(parseTablet, (*vtlocal.Cluster).KillMySQL),
	"remove-tablet":  onTablet(parseTablet, (*vtlocal.Cluster).RemoveTablet),
	"restart-vtgate": {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error { return c.RestartVtgate(ctx) }},
	"stop-vtgate":    {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error { return c.StopVtgate(ctx) }},
	"start-vtgate":   {0, func(ctx context.Context, c *vtlocal.Cluster, _ []string) error { return c.StartVtgate(ctx) }},
}

// onTablet is a verb of one tablet, read by parse.
func onTablet(parse func(string) (int, error), do func(*vtlocal.Cluster, context.Context, int) error) verb {
	return verb{1, func(ctx context.Context, c *vtlocal.Cluster, a []string) error {
		uid, err := parse(a[0])
		if err != nil {
			return err
		}
		return do(c, ctx, uid)
	}}
}

func runVerb(ctx context.Context, c *vtlocal.Cluster, name string, args []string) error {
	v, ok := verbs[name]
	if !ok {
		return fmt.Errorf("%w: unknown verb %q", errUsage, name)
	}
	if v.n >= 0 && len(args) != v.n {
		return fmt.Errorf("%w: want %d, got %d", errUsage, v.n, len(args))
	}
	return v.run(ctx, c, args)
}

// tabletUID reads a tablet's UID (a number, e.g. 200).
func tabletUID(s string) (int, error) {
	uid, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: UID must be a number: %v", errUsage, err)
	}
	return uid, nil
}

// parseTablet reads a tablet as a UID or an alias (zone1-0000000200).
func parseTablet(s string) (int, error) {
	uid, err := vtlocal.ParseTablet(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errUsage, err)
	}
	return uid, nil
}

// reparent makes a replica of KEYSPACE/SHARD [TABLET] the primary (TABLET
// 0: the shard's first replica) and prints its alias.
func reparent(ctx context.Context, do func(context.Context, string, string, int) (vtlocal.TabletRecord, error), args []string) error {
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
		if uid, err = parseTablet(args[1]); err != nil {
			return err
		}
	}
	return printAlias(do(ctx, ks, shard, uid))
}

func printAlias(t vtlocal.TabletRecord, err error) error {
	if err == nil {
		fmt.Println(t.Alias())
	}
	return err
}
