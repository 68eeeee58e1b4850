package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"vitess.io/vitess/go/vt/vtgate/vtgateconn"

	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// schemaChecker refuses stream definitions that name a keyspace, tables or
// columns vtgate does not know: vtgate would accept such a filter and the
// stream would die at the first row (or, for a keyspace, at every start).
// What it cannot decide because vtgate fails is a *source.UpstreamError:
// the handler answers 503 when vtgate is unreachable, 502 when it refuses.
type schemaChecker struct {
	conn *vtgateconn.VTGateConn
}

// checkTimeout bounds the whole check. vtgate calls wait for the connection,
// so while vtgate is down this is how long a creation waits for its 503.
var checkTimeout = 5 * time.Second

func (c *schemaChecker) CheckDefinition(ctx context.Context, d *streams.Definition) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := c.checkKeyspace(ctx, d.Keyspace); err != nil {
		return err
	}
	sess := c.conn.Session(d.Keyspace+"@primary", nil)
	check := func(field, table string, columns []string) error {
		// LIMIT 0 returns the column list without touching rows.
		res, err := sess.Execute(ctx, "select * from `"+table+"` limit 0", nil, false)
		switch {
		case err == nil:
		case unknownTable(err):
			return &streams.ValidationError{Field: field, Msg: fmt.Sprintf("table %q does not exist in keyspace %q", table, d.Keyspace)}
		case unknownKeyspace(err):
			return unknownKeyspaceError(d.Keyspace)
		default:
			return &source.UpstreamError{Op: fmt.Sprintf("check table %s.%s", d.Keyspace, table), Err: err}
		}
		have := map[string]bool{}
		for _, f := range res.Fields {
			have[strings.ToLower(f.Name)] = true
		}
		for _, col := range columns {
			if !have[strings.ToLower(col)] {
				return &streams.ValidationError{Field: field, Msg: fmt.Sprintf("table %q has no column %q", table, col)}
			}
		}
		return nil
	}
	for i, t := range d.Tables {
		if err := check(fmt.Sprintf("tables[%d]", i), t, nil); err != nil {
			return err
		}
	}
	for i, r := range d.Rules {
		if strings.HasPrefix(r.Match, "/") {
			continue
		}
		if err := check(fmt.Sprintf("rules[%d]", i), r.Match, r.Columns()); err != nil {
			return err
		}
	}
	return nil
}

// checkKeyspace asks vtgate for its keyspaces: a definition with only
// /regex/ rules names no table that would reveal an unknown keyspace, and
// every reader of such a stream would fail.
func (c *schemaChecker) checkKeyspace(ctx context.Context, keyspace string) error {
	res, err := c.conn.Session("", nil).Execute(ctx, "show vitess_keyspaces", nil, false)
	if err != nil {
		return &source.UpstreamError{Op: "list keyspaces", Err: err}
	}
	for _, row := range res.Rows {
		if len(row) > 0 && row[0].ToString() == keyspace {
			return nil
		}
	}
	return unknownKeyspaceError(keyspace)
}

func unknownKeyspaceError(keyspace string) error {
	return &streams.ValidationError{Field: "keyspace", Msg: fmt.Sprintf("keyspace %q does not exist", keyspace)}
}

// unknownTable recognises vtgate's answers for a table it does not know:
// "table x not found" from the vschema of a sharded keyspace, MySQL's
// 1146 "Table 'vt_ks.x' doesn't exist" passed on from an unsharded one.
func unknownTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "doesn't exist") || strings.Contains(msg, "errno 1146") ||
		strings.Contains(msg, "not found") && strings.Contains(msg, "table")
}

// unknownKeyspace recognises VT05003 "unknown database 'x' in vschema".
func unknownKeyspace(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "unknown database")
}
