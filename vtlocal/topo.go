package vtlocal

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
)

// tabletKey is where etcd2topo keeps a tablet record of the cell.
func tabletKey(alias string) string { return "/vitess/" + Cell + "/tablets/" + alias + "/Tablet" }

// updateTabletRecord rewrites a tablet's topology record with change,
// atomically (compare-and-swap on the etcd revision, retried if the
// tablet's vttablet wrote it meanwhile). No vtctldclient command edits
// these fields.
func (c *Cluster) updateTabletRecord(ctx context.Context, alias string, change func(*topodatapb.Tablet)) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.EtcdAddr()}, DialTimeout: 5 * time.Second, Context: ctx})
	if err != nil {
		return err
	}
	defer cli.Close()
	key := tabletKey(alias)
	for attempt := 0; attempt < 10; attempt++ {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 1 {
			return fmt.Errorf("no tablet record %s", key)
		}
		kv := resp.Kvs[0]
		var t topodatapb.Tablet
		if err := proto.Unmarshal(kv.Value, &t); err != nil {
			return fmt.Errorf("tablet record %s: %w", key, err)
		}
		change(&t)
		b, err := proto.Marshal(&t)
		if err != nil {
			return err
		}
		tx, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(b))).Commit()
		if err != nil {
			return err
		}
		if tx.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("tablet record %s kept changing", key)
}

// withPrimaryHostHidden runs start (a replica's vttablet start) while the
// shard primary's topology record names no MySQL host, then puts the host
// back.
//
// Why: a vttablet that starts as a replica of a shard with a primary sets
// up replication itself (tabletmanager initializeReplication), and on
// MariaDB that always fails, so the vttablet exits: its errant-GTID check
// parses the primary's server_uuid, which the MariaDB flavor reports as ""
// (`invalid MySQL 5.6 SID ""`). initializeReplication skips the step, with
// a warning, when the primary's record has no MySQL host (as after the
// primary's vttablet stopped). The host is hidden for the second or so
// the vttablet takes to start; vtgate does not use it (it reaches tablets
// by their gRPC address), only replication set-up does, and the harness
// does that itself (replicateFrom).
func (c *Cluster) withPrimaryHostHidden(ctx context.Context, primary string, start func() error) error {
	var host string
	if err := c.updateTabletRecord(ctx, primary, func(t *topodatapb.Tablet) {
		host, t.MysqlHostname = t.MysqlHostname, ""
	}); err != nil {
		return fmt.Errorf("hiding the MySQL host of %s: %w", primary, err)
	}
	err := start()
	// Put it back even if ctx ended: a primary without a MySQL host can't
	// be replicated from by Vitess.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rerr := c.updateTabletRecord(rctx, primary, func(t *topodatapb.Tablet) {
		if t.MysqlHostname == "" {
			t.MysqlHostname = host
		}
	}); rerr != nil {
		return fmt.Errorf("restoring the MySQL host of %s: %w (after: %v)", primary, rerr, err)
	}
	return err
}

// tabletProto reads a tablet's topology record.
func (c *Cluster) tabletProto(ctx context.Context, alias string) (*topodatapb.Tablet, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.EtcdAddr()}, DialTimeout: 5 * time.Second, Context: ctx})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, tabletKey(alias))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) != 1 {
		return nil, fmt.Errorf("no tablet record %s", tabletKey(alias))
	}
	var t topodatapb.Tablet
	if err := proto.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		return nil, fmt.Errorf("tablet record %s: %w", tabletKey(alias), err)
	}
	return &t, nil
}
