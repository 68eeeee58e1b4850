package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// vstreamerCount reads a vttablet's VStreamerCount (/debug/vars): the
// vstreamers it runs, each reading the binlog through its own dump thread.
// Unlike SHOW PROCESSLIST it answers when MariaDB has no connection left.
func vstreamerCount(ctx context.Context, web string) (int64, error) {
	if err := loopbackOnly(web); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+web+"/debug/vars", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var vars struct {
		VStreamerCount int64 `json:"VStreamerCount"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return 0, fmt.Errorf("%s: %w", web, err)
	}
	return vars.VStreamerCount, nil
}

// vstreamCount sums vtgate's VStreamsCount (/debug/vars): the number of
// active shard streams vtgate serves, by "keyspace.shard.tablet_type". A
// VStream over a keyspace of n shards counts n; the gauge is what vtgate's
// vstream manager adds to when a shard stream starts and takes from when
// it ends.
func vstreamCount(ctx context.Context, varsURL string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", varsURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var vars struct {
		VStreamsCount map[string]int64 `json:"VStreamsCount"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return 0, fmt.Errorf("%s: %w", varsURL, err)
	}
	var n int64
	for _, v := range vars.VStreamsCount {
		n += v
	}
	return n, nil
}

// vtctld runs vtctldclient against the cluster's vtctld.
type vtctld struct {
	bin    string
	server string
}

func (v vtctld) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, v.bin, append([]string{"--server", v.server}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, fmt.Errorf("vtctldclient %s: %w: %s", args[0], err, errorMessage(ee.Stderr))
		}
		return nil, fmt.Errorf("vtctldclient %s: %w", args[0], err)
	}
	return out, nil
}

// tablet is one tablet of GetTablets.
type tablet struct {
	Alias    string
	Keyspace string
	Shard    string
	Type     string
	Web      string // host:port of its HTTP server (/debug/vars)
}

// primaries lists the primary tablets (GetTablets, awk format: alias
// keyspace shard type …).
func (v vtctld) primaries(ctx context.Context) ([]tablet, error) {
	out, err := v.run(ctx, "GetTablets", "--tablet-type", "primary")
	if err != nil {
		return nil, err
	}
	return parseTablets(string(out)), nil
}

func parseTablets(out string) []tablet {
	var ts []tablet
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 {
			ts = append(ts, tablet{Alias: f[0], Keyspace: f[1], Shard: f[2], Type: f[3], Web: f[4]})
		}
	}
	return ts
}

// dumpThreads counts the binlog dump threads on a tablet's MariaDB: one per
// replica or VStream reading its binlog (SHOW PROCESSLIST, Command
// "Binlog Dump" or "Binlog Dump GTID").
func (v vtctld) dumpThreads(ctx context.Context, alias string) (int, error) {
	out, err := v.run(ctx, "ExecuteFetchAsDBA", "--json", alias, "SHOW PROCESSLIST")
	if err != nil {
		return 0, err
	}
	return countDumpThreads(out)
}

// countDumpThreads counts them in a query result of ExecuteFetchAsDBA
// --json: fields by name, rows as arrays of values.
func countDumpThreads(out []byte) (int, error) {
	var res struct {
		Fields []struct {
			Name string `json:"name"`
		} `json:"fields"`
		Rows [][]any `json:"rows"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("SHOW PROCESSLIST: %w", err)
	}
	col := -1
	for i, f := range res.Fields {
		if strings.EqualFold(f.Name, "Command") {
			col = i
		}
	}
	if col < 0 {
		return 0, fmt.Errorf("SHOW PROCESSLIST: no Command column")
	}
	n := 0
	for _, row := range res.Rows {
		if col < len(row) {
			if s, ok := row[col].(string); ok && strings.HasPrefix(s, "Binlog Dump") {
				n++
			}
		}
	}
	return n, nil
}

// settle rotates the binlogs of keyspace's primaries and waits (up to
// limit) until their dump-thread count stops falling. A VStream that ended
// leaves its dump thread behind until the thread next has something to
// send; a rotation wakes it and it exits. Without this a run would count
// the threads of the previous run's readers.
func (p *probe) settle(ctx context.Context, keyspace string, limit time.Duration) {
	ts, err := p.vt.primaries(ctx)
	if err != nil {
		p.note(err)
		return
	}
	total := func() int {
		n := 0
		for _, t := range ts {
			if t.Keyspace == keyspace {
				c, err := p.vt.dumpThreads(ctx, t.Alias)
				if err != nil {
					p.note(err)
				}
				n += c
			}
		}
		return n
	}
	for _, t := range ts {
		if t.Keyspace == keyspace {
			if _, err := p.vt.run(ctx, "ExecuteFetchAsDBA", t.Alias, "FLUSH BINARY LOGS"); err != nil {
				p.note(err)
			}
		}
	}
	deadline := time.Now().Add(limit)
	prev := total()
	tk := time.NewTicker(300 * time.Millisecond)
	defer tk.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		n := total()
		if n >= prev {
			return
		}
		prev = n
	}
}

// errorMessage is the "msg" of vtctldclient's JSON log line on stderr, or
// the whole of it.
func errorMessage(stderr []byte) string {
	var line struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal(bytes.TrimSpace(stderr), &line) == nil && line.Msg != "" {
		return line.Msg
	}
	return strings.TrimSpace(string(stderr))
}
