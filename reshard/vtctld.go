package reshard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"vitess.io/vitess/go/sqltypes"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtctldatapb "vitess.io/vitess/go/vt/proto/vtctldata"
	vtctlservicepb "vitess.io/vitess/go/vt/proto/vtctlservice"
	"vitess.io/vitess/go/vt/topo/topoproto"
)

// Vtctld reads from vtctld what vtgate does not stream about MoveTables:
// the routing rules (which tables a workflow moves, and where they are
// routed) and the journals on the source primaries.
type Vtctld struct {
	conn *grpc.ClientConn
	c    vtctlservicepb.VtctldClient
}

// DialVtctld connects to vtctld's gRPC address (plaintext unless opts say
// otherwise). The connection is made lazily.
func DialVtctld(addr string, opts ...grpc.DialOption) (*Vtctld, error) {
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial vtctld %s: %w", addr, err)
	}
	return &Vtctld{conn: conn, c: vtctlservicepb.NewVtctldClient(conn)}, nil
}

// Close closes the connection.
func (v *Vtctld) Close() error { return v.conn.Close() }

// vtctldTimeout bounds each call: a journal read holds up the streams of a
// keyspace while a MoveTables workflow runs.
const vtctldTimeout = 5 * time.Second

// RoutedTables returns the "keyspace.table" names the routing rules
// mention, on either side of a rule (tablet-type suffixes dropped). A
// MoveTables workflow adds rules for its tables at create, points them at
// the target at SwitchTraffic and removes them at complete.
func (v *Vtctld) RoutedTables(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, vtctldTimeout)
	defer cancel()
	resp, err := v.c.GetRoutingRules(ctx, &vtctldatapb.GetRoutingRulesRequest{})
	if err != nil {
		return nil, fmt.Errorf("vtctld GetRoutingRules: %w", err)
	}
	out := map[string]bool{}
	add := func(name string) {
		name, _, _ = strings.Cut(name, "@")
		if strings.Contains(name, ".") {
			out[name] = true
		}
	}
	for _, r := range resp.GetRoutingRules().GetRules() {
		add(r.FromTable)
		for _, t := range r.ToTables {
			add(t)
		}
	}
	return out, nil
}

// Primaries returns the primary tablet alias of each shard of keyspace.
func (v *Vtctld) Primaries(ctx context.Context, keyspace string) (map[string]*topodatapb.TabletAlias, error) {
	ctx, cancel := context.WithTimeout(ctx, vtctldTimeout)
	defer cancel()
	resp, err := v.c.GetTablets(ctx, &vtctldatapb.GetTabletsRequest{Keyspace: keyspace, TabletType: topodatapb.TabletType_PRIMARY})
	if err != nil {
		return nil, fmt.Errorf("vtctld GetTablets %s: %w", keyspace, err)
	}
	out := map[string]*topodatapb.TabletAlias{}
	for _, t := range resp.Tablets {
		out[t.Shard] = t.Alias
	}
	return out, nil
}

// JournalRows reads the journals on one primary: the `val` of every row of
// `_vt.resharding_journal` written for dbName (the tablet's database,
// vt_<keyspace>; the table may hold rows of other databases).
func (v *Vtctld) JournalRows(ctx context.Context, alias *topodatapb.TabletAlias, dbName string) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, vtctldTimeout)
	defer cancel()
	resp, err := v.c.ExecuteFetchAsDBA(ctx, &vtctldatapb.ExecuteFetchAsDBARequest{
		TabletAlias: alias,
		Query:       "select db_name, val from _vt.resharding_journal",
		MaxRows:     10000,
	})
	if err != nil {
		return nil, fmt.Errorf("read journals on %s: %w", topoproto.TabletAliasString(alias), err)
	}
	res := sqltypes.Proto3ToResult(resp.Result)
	var out [][]byte
	for _, row := range res.Rows {
		if len(row) < 2 || row[0].ToString() != dbName {
			continue
		}
		b, err := row[1].ToBytes()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
