package source

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// Every position a reader hands out carries the incarnation of each shard
// (position/incarnation.go; DESIGN §4 rule 6). vtgate sends positions
// without them, so the assembler stamps each one: a shard the stream was
// opened at keeps the incarnation its position had, for as long as the
// stream reads it; any other shard — the stream opened at "current" or
// for a snapshot, or crossed a reshard to it — is of the incarnation
// Incarnations gives, asked when the shard first appears.

// incarnation returns the incarnation of keyspace/shard for this stream.
func (a *assembler) incarnation(ctx context.Context, keyspace, shard string) (string, error) {
	key := keyspace + "/" + shard
	if inc, ok := a.inc[key]; ok {
		return inc, nil
	}
	if a.incarnations == nil {
		return "", nil
	}
	of := a.looked[keyspace]
	if of == nil {
		var err error
		if of, err = a.incarnations(ctx, keyspace); err != nil {
			return "", fmt.Errorf("source: incarnation of %s unknown: %w", key, err)
		}
		if a.looked == nil {
			a.looked = map[string]func(string) string{}
		}
		a.looked[keyspace] = of
	}
	inc := of(shard)
	a.inc[key] = inc
	return inc, nil
}

// stamp returns v with every entry of its shard's incarnation.
func (a *assembler) stamp(ctx context.Context, v *binlogdatapb.VGtid) (*binlogdatapb.VGtid, error) {
	if v == nil {
		return nil, nil
	}
	return position.Stamp(v, func(keyspace, shard string) (string, error) {
		return a.incarnation(ctx, keyspace, shard)
	})
}

// stampJournal returns j with its participants' local position and its
// targets' positions of their incarnations: the hub compares them with
// stamped positions. The targets are new shards: their incarnations are
// asked afresh (one of them may reuse a name the stream read before).
func (a *assembler) stampJournal(ctx context.Context, keyspace, shard string, j *binlogdatapb.Journal) (*binlogdatapb.Journal, error) {
	if j == nil || j.MigrationType != binlogdatapb.MigrationType_SHARDS {
		return j, nil
	}
	out := proto.Clone(j).(*binlogdatapb.Journal)
	if out.LocalPosition != "" {
		inc, err := a.incarnation(ctx, keyspace, shard)
		if err != nil {
			return nil, err
		}
		out.LocalPosition = position.Shard{GTID: out.LocalPosition, Incarnation: inc}.Text()
	}
	a.looked = nil
	for _, sg := range out.ShardGtids {
		ks := sg.Keyspace
		if ks == "" {
			ks = keyspace
		}
		delete(a.inc, ks+"/"+sg.Shard)
	}
	v, err := a.stamp(ctx, &binlogdatapb.VGtid{ShardGtids: out.ShardGtids})
	if err != nil {
		return nil, err
	}
	out.ShardGtids = v.ShardGtids
	return out, nil
}
