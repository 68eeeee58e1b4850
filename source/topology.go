package source

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/position"
)

// Topology asks vtgate which shards of keyspaces serve and which
// non-serving shards still have a running primary tablet.
//
// vtgate is the one view of the topology the gateway is sure to have: its
// serving graph (SHOW VITESS_SHARDS) lists the shards that take traffic,
// and its health check (SHOW VITESS_TABLETS) the tablets it can stream from,
// including the primary of an old shard after SwitchTraffic. A shard in
// neither has been deleted or has no tablet: vtgate would fail the VStream
// (deleted) or hang for 90 s looking for a tablet (down), so the cursor is
// rebuilt instead of handed to vtgate.
func (c *Client) Topology(ctx context.Context, keyspaces ...string) (Topology, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topo := Topology{Shards: map[string]ShardState{}, Keyspaces: map[string]bool{}, Terms: map[string]time.Time{}}
	want := map[string]bool{}
	for _, k := range keyspaces {
		want[k] = true
		topo.Keyspaces[k] = true
	}
	sess := c.conn.Session("", nil)
	res, err := sess.Execute(ctx, "show vitess_tablets", nil, false)
	if err != nil {
		return topo, fmt.Errorf("source: show vitess_tablets: %w", err)
	}
	for _, row := range res.Rows {
		// Cell, Keyspace, Shard, TabletType, State, Alias, Hostname, PrimaryTermStartTime
		if len(row) < 5 {
			continue
		}
		ks, shard, typ := row[1].ToString(), row[2].ToString(), row[3].ToString()
		if want[ks] && strings.EqualFold(typ, "PRIMARY") {
			topo.Shards[ks+"/"+shard] = ShardReadable
			if len(row) >= 8 {
				if t, err := time.Parse(time.RFC3339, row[7].ToString()); err == nil {
					topo.Terms[ks+"/"+shard] = t
				}
			}
		}
	}
	res, err = sess.Execute(ctx, "show vitess_shards", nil, false)
	if err != nil {
		return topo, fmt.Errorf("source: show vitess_shards: %w", err)
	}
	for _, row := range res.Rows {
		ks, shard, ok := strings.Cut(row[0].ToString(), "/")
		if ok && want[ks] {
			topo.Shards[ks+"/"+shard] = ShardServing
		}
	}
	return topo, nil
}

// ShardState is what the gateway knows of one shard of a cursor.
type ShardState int

// Shard states.
const (
	// ShardGone: not in the serving graph and no tablet serves it (deleted
	// by Reshard complete, or its tablets are down).
	ShardGone ShardState = iota
	// ShardServing: in the serving graph for PRIMARY.
	ShardServing
	// ShardReadable: not serving (a resharded-away old shard) but a primary
	// tablet still runs, so vtgate can stream it up to its journal.
	ShardReadable
)

// Topology maps "keyspace/shard" to its state. Keyspaces not in Keyspaces
// are unknown and left alone.
type Topology struct {
	Shards    map[string]ShardState
	Keyspaces map[string]bool
	// Terms is when each shard's primary began its term (whole seconds;
	// absent when vtgate does not know): it tells a retired shard still
	// running from a new one of the same name (reshard.Live).
	Terms map[string]time.Time
}

// TermStart returns when keyspace/shard's primary began its term, or zero.
func (t Topology) TermStart(keyspace, shard string) time.Time {
	return t.Terms[keyspace+"/"+shard]
}

// State returns the state of keyspace/shard; shards of keyspaces not asked
// about count as serving (not ours to judge).
func (t Topology) State(keyspace, shard string) ShardState {
	if !t.Keyspaces[keyspace] {
		return ShardServing // not ours to judge
	}
	return t.Shards[keyspace+"/"+shard]
}

// Serving lists the serving shards of keyspace, sorted.
func (t Topology) Serving(keyspace string) []string {
	var out []string
	for key, st := range t.Shards {
		if ks, shard, _ := strings.Cut(key, "/"); ks == keyspace && st == ShardServing {
			out = append(out, shard)
		}
	}
	sort.Strings(out)
	return out
}

// Current returns the current position of every shard of keyspace.
//
// A VStream started at "current" reports each shard's real position in its
// own time; until all have, its VGTIDs still say "current" for some shards,
// and a cursor taken then would restart those shards at a later "current"
// and skip what they committed in between. Resolving the position first
// gives readers a start that is a real position on every shard.
func (c *Client) Current(ctx context.Context, keyspace string) (*binlogdatapb.VGtid, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r := c.Open(ctx, Spec{Name: "current/" + keyspace, Keyspace: keyspace, Rules: []*binlogdatapb.Rule{{Match: "__vsgw_none__"}}}, NowPosition(keyspace))
	defer r.Close()
	for {
		t, err := r.Next(ctx)
		if err != nil {
			return nil, &UpstreamError{Op: "current position of keyspace " + keyspace, Err: err}
		}
		// Resolved: a real binlog position on every shard. (A shard
		// without a GTID would be a copy phase, which "now" never starts.)
		if p := position.Of(t.VGtid); p.Concrete() && !p.Copying() {
			return t.VGtid, nil
		}
	}
}
