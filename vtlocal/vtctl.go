package vtlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// vtctl runs vtctldclient against vtctld and returns its stdout. It runs as
// the caller: only mysqld refuses root, clients do not.
func (c *Cluster) vtctl(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"--server", c.VtctldAddr()}, args...)
	return c.run(ctx, nil, filepath.Join(c.binDir, "vtctldclient"), full...)
}

// vtctlJSON runs vtctldclient and decodes its JSON output into v.
func (c *Cluster) vtctlJSON(ctx context.Context, v any, args ...string) error {
	out, err := c.vtctl(ctx, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("vtctldclient %s: decoding output: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 10))
	}
	return nil
}

// Subsets of the Vitess protobuf messages as vtctldclient prints them
// (protojson: lower_snake field names, enums as names, int64 as strings).

type tabletAlias struct {
	Cell string `json:"cell"`
	UID  int    `json:"uid"`
}

func (a *tabletAlias) String() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%s-%010d", a.Cell, a.UID)
}

type tabletInfo struct {
	Alias    tabletAlias `json:"alias"`
	Keyspace string      `json:"keyspace"`
	Shard    string      `json:"shard"`
	Type     enumOrInt   `json:"type"`
	Hostname string      `json:"hostname"`
}

// enumOrInt accepts a protobuf enum printed either as its name or its number.
type enumOrInt string

func (e *enumOrInt) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = enumOrInt(s)
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	// topodata.TabletType numbers, for the types a local cluster uses.
	names := map[int]string{0: "UNKNOWN", 1: "PRIMARY", 2: "REPLICA", 3: "RDONLY", 4: "SPARE", 5: "EXPERIMENTAL", 6: "BACKUP", 7: "RESTORE", 8: "DRAINED"}
	*e = enumOrInt(names[n])
	if *e == "" {
		*e = enumOrInt(strconv.Itoa(n))
	}
	return nil
}

type shardRecord struct {
	Keyspace string `json:"keyspace"`
	Name     string `json:"name"`
	Shard    struct {
		PrimaryAlias     *tabletAlias `json:"primary_alias"`
		IsPrimaryServing bool         `json:"is_primary_serving"`
	} `json:"shard"`
}

type keyspaceRecord struct {
	Name string `json:"name"`
}

type vschema struct {
	Sharded bool                       `json:"sharded"`
	Tables  map[string]json.RawMessage `json:"tables"`
}

// tablets lists the tablets of a keyspace (and shard, if not empty).
func (c *Cluster) tablets(ctx context.Context, keyspace, shard string) ([]tabletInfo, error) {
	args := []string{"GetTablets", "--format", "json"}
	if keyspace != "" {
		args = append(args, "--keyspace", keyspace)
	}
	if shard != "" {
		args = append(args, "--shard", shard)
	}
	var ts []tabletInfo
	if err := c.vtctlJSON(ctx, &ts, args...); err != nil {
		return nil, err
	}
	return ts, nil
}

// tabletByUID returns the topology record of tablet uid, or nil.
func (c *Cluster) tabletByUID(ctx context.Context, uid int) (*tabletInfo, error) {
	ts, err := c.tablets(ctx, "", "")
	if err != nil {
		return nil, err
	}
	for i := range ts {
		if ts[i].Alias.UID == uid {
			return &ts[i], nil
		}
	}
	return nil, nil
}

func (c *Cluster) keyspaces(ctx context.Context) ([]string, error) {
	var ks []keyspaceRecord
	if err := c.vtctlJSON(ctx, &ks, "GetKeyspaces"); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ks))
	for _, k := range ks {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	return names, nil
}

// shards lists the shard names of a keyspace as recorded in the topology.
func (c *Cluster) shards(ctx context.Context, keyspace string) ([]string, error) {
	var all struct {
		Shards map[string]json.RawMessage `json:"shards"`
	}
	if err := c.vtctlJSON(ctx, &all, "FindAllShardsInKeyspace", keyspace); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all.Shards))
	for name := range all.Shards {
		names = append(names, name)
	}
	slices.SortFunc(names, compareShards)
	return names, nil
}

func (c *Cluster) shard(ctx context.Context, keyspace, shard string) (*shardRecord, error) {
	var s shardRecord
	if err := c.vtctlJSON(ctx, &s, "GetShard", keyspace+"/"+shard); err != nil {
		return nil, err
	}
	return &s, nil
}

func (c *Cluster) getVSchema(ctx context.Context, keyspace string) (*vschema, error) {
	var v vschema
	if err := c.vtctlJSON(ctx, &v, "GetVSchema", keyspace); err != nil {
		return nil, err
	}
	return &v, nil
}

// compareShards orders shard names by key range start ("-80" < "80-"),
// which is also the order a plain string comparison gives for hex ranges,
// except that the unsharded "0" sorts first.
func compareShards(a, b string) int {
	if a == b {
		return 0
	}
	if a == "0" {
		return -1
	}
	if b == "0" {
		return 1
	}
	return strings.Compare(a, b)
}

// isNotFound recognises topology "node doesn't exist" errors in
// vtctldclient output.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "node doesn't exist") || strings.Contains(s, "NotFound") ||
		strings.Contains(s, "not found") || strings.Contains(s, "NOT_FOUND")
}
