package vtlocal

import (
	"context"
	"time"
)

// StopVtgate stops vtgate (SIGTERM, then SIGKILL after 30 s) and leaves it
// stopped: clients of its gRPC and MySQL ports get connection refused
// until StartVtgate. Tests use it for a vtgate outage of their chosen
// length; Up also starts it again.
func (c *Cluster) StopVtgate(ctx context.Context) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	pid := c.daemonPid(vtgateD)
	if pid == 0 {
		return nil
	}
	c.log.Info("stopping vtgate", "pid", pid)
	return stopPid(ctx, pid, "vtgate", 30*time.Second)
}

// StartVtgate starts vtgate if it is not running and waits until it serves
// queries on the cluster's keyspaces (as RestartVtgate does).
func (c *Cluster) StartVtgate(ctx context.Context) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.startVtgate(ctx); err != nil {
		return err
	}
	return c.waitVtgate(ctx, c.probes(ctx))
}
