package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"vitess.io/vitess/go/vt/vtgate/vtgateconn"

	"github.com/vstream-gateway/vstream-gateway/streams"
)

// schemaChecker refuses stream definitions that name tables or columns the
// keyspace does not have: vtgate would accept such a filter and the stream
// would die at the first row.
type schemaChecker struct {
	conn *vtgateconn.VTGateConn
}

func (c *schemaChecker) CheckDefinition(ctx context.Context, d *streams.Definition) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess := c.conn.Session(d.Keyspace+"@primary", nil)
	check := func(table string, columns []string) error {
		// LIMIT 0 returns the column list without touching rows.
		res, err := sess.Execute(ctx, "select * from `"+table+"` limit 0", nil, false)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "doesn't exist") || strings.Contains(msg, "not found") || strings.Contains(msg, "Unknown database") {
				return &streams.ValidationError{Field: "tables", Msg: fmt.Sprintf("table %q does not exist in keyspace %q", table, d.Keyspace)}
			}
			return fmt.Errorf("check table %s.%s: %w", d.Keyspace, table, err)
		}
		have := map[string]bool{}
		for _, f := range res.Fields {
			have[strings.ToLower(f.Name)] = true
		}
		for _, col := range columns {
			if !have[strings.ToLower(col)] {
				return &streams.ValidationError{Field: "rules", Msg: fmt.Sprintf("table %q has no column %q", table, col)}
			}
		}
		return nil
	}
	for _, t := range d.Tables {
		if err := check(t, nil); err != nil {
			return err
		}
	}
	for _, r := range d.Rules {
		if strings.HasPrefix(r.Match, "/") {
			continue
		}
		if err := check(r.Match, r.Columns()); err != nil {
			return err
		}
	}
	return nil
}
