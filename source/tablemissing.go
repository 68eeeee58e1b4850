package source

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// TableMissingError: vttablet refused the stream because a table of its
// filter, with rows in the binlog ahead of the position, is no longer in
// the keyspace's schema — and vtgate confirms the table is absent from the
// keyspace. A MoveTables `complete` (or a DROP TABLE) behind a reader's
// position does this: the binlog still holds the table's rows up to the
// DROP, but vttablet can no longer describe them. Reading from that
// position again fails the same way, forever: the caller decides what the
// stream does with the gap (hub, DESIGN §4.1 rule 9).
type TableMissingError struct {
	Keyspace string
	Table    string
	Err      error // vtgate's refusal
}

func (e *TableMissingError) Error() string {
	return fmt.Sprintf("table %s is no longer in keyspace %s, and the binlog from the stream's position holds its rows (vttablet cannot describe them): %v", e.Table, e.Keyspace, e.Err)
}

func (e *TableMissingError) Unwrap() error { return e.Err }

// unknownTableRE matches vttablet's refusal of a binlog table it cannot
// find (go/vt/vttablet/tabletserver/vstreamer/vstreamer.go,
// buildTableColumns, with the default FieldEventMode ERR_ON_MISMATCH),
// which vstreamer wraps ("…error @ (including the GTID we failed to
// process) <gtid>: unknown table T in schema\nfailed to build table
// replication plan for table T") and vtgate again (measured on the local
// cluster: TestMoveTablesDropped logs it).
var unknownTableRE = regexp.MustCompile("unknown table (\\S+) in schema")

// UnknownTable returns the table a VStream error says vttablet does not
// know. The refusal alone is not final: vttablet turns every failure of
// its schema lookup into this message (schema.Engine.GetTableForPos
// reloads the schema from MySQL when the table is not cached, and a
// failed connection or reload during a tablet restart reads the same),
// so a Reader asks vtgate whether the table exists before it gives up.
func UnknownTable(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	m := unknownTableRE.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return strings.Trim(m[1], "`"), true
}

// tableAbsent asks vtgate whether keyspace has table, with SHOW TABLES
// LIKE on the keyspace's primary (vtgate sends it to one of its shards; a
// MoveTables complete drops the table on every shard). It reports true
// only for an answer without the table: a failed question is no answer.
func (c *Client) tableAbsent(ctx context.Context, keyspace, table string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := c.conn.Session(keyspace+"@primary", nil).Execute(ctx, "show tables like '"+likeLiteral(table)+"'", nil, false)
	if err != nil {
		return false, fmt.Errorf("source: is table %s in keyspace %s: %w", table, keyspace, err)
	}
	for _, row := range res.Rows {
		if len(row) > 0 && strings.EqualFold(row[0].ToString(), table) {
			return false, nil
		}
	}
	return true, nil
}

// likeLiteral quotes s as the body of a LIKE pattern that matches s only.
func likeLiteral(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\\\`) // a literal backslash, escaped for LIKE
			continue
		case '%', '_':
			b.WriteString(`\\`)
		case '\'':
			b.WriteByte('\'')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tableMissing returns the final error for vttablet's refusal of table,
// or nil when vtgate does not confirm the table is gone (then the refusal
// is retried as an outage would be).
func (r *Reader) tableMissing(ctx context.Context, table string, err error) *TableMissingError {
	absent, cerr := r.c.tableAbsent(ctx, r.spec.Keyspace, table)
	if cerr != nil || !absent {
		r.c.log.Warn("vttablet does not know a table of the stream, which vtgate does not confirm gone: retrying",
			"stream", r.spec.Name, "keyspace", r.spec.Keyspace, "table", table, "err", err, "check_err", cerr)
		return nil
	}
	return &TableMissingError{Keyspace: r.spec.Keyspace, Table: table, Err: err}
}
