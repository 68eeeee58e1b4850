package vtlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// BinlogDumpThreads counts, per shard of keyspace, the binlog dump threads
// on the shard's tablet's mysqld: one per VStream (or replica) reading its
// binlog. It is what a VStream client costs the primary, so load tests and
// fan-out tests count it.
func (c *Cluster) BinlogDumpThreads(ctx context.Context, keyspace string) (map[string]int, error) {
	info, err := c.BinlogDumpThreadInfo(ctx, keyspace)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for shard, threads := range info {
		out[shard] = len(threads)
	}
	return out, nil
}

// BinlogDumpThreadInfo lists, per shard of keyspace, the binlog dump
// threads on the shard's tablet's mysqld as "id user@host time state".
func (c *Cluster) BinlogDumpThreadInfo(ctx context.Context, keyspace string) (map[string][]string, error) {
	recs, err := c.Tablets()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, r := range recs {
		if r.Keyspace != keyspace || !c.vttabletAlive(r.UID) {
			continue
		}
		threads, err := c.dumpThreads(ctx, r.Alias())
		if err != nil {
			return nil, err
		}
		out[r.Shard] = append(out[r.Shard], threads...)
	}
	return out, nil
}

func (c *Cluster) dumpThreads(ctx context.Context, alias string) ([]string, error) {
	raw, err := c.vtctl(ctx, "ExecuteFetchAsDBA", "--json", alias, "SHOW PROCESSLIST")
	if err != nil {
		return nil, err
	}
	var res struct {
		Fields []struct{ Name string } `json:"fields"`
		Rows   [][]any                 `json:"rows"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("SHOW PROCESSLIST on %s: %w", alias, err)
	}
	cols := map[string]int{}
	for i, f := range res.Fields {
		cols[strings.ToLower(f.Name)] = i
	}
	col, ok := cols["command"]
	if !ok {
		return nil, fmt.Errorf("SHOW PROCESSLIST on %s: no Command column", alias)
	}
	cell := func(row []any, name string) any {
		if i, ok := cols[name]; ok && i < len(row) {
			return row[i]
		}
		return nil
	}
	var out []string
	for _, row := range res.Rows {
		if s, ok := cell(row, "command").(string); ok && col < len(row) && strings.HasPrefix(s, "Binlog Dump") {
			out = append(out, fmt.Sprintf("%v %v@%v %vs %v", cell(row, "id"), cell(row, "user"), cell(row, "host"), cell(row, "time"), cell(row, "state")))
		}
	}
	return out, nil
}
