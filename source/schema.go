package source

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"vitess.io/vitess/go/vt/vtgate/vtgateconn"
)

// schemaCache answers "is this column JSON?" for the encoder.
//
// MariaDB stores JSON as LONGTEXT with a json_valid() CHECK constraint, and
// a VStream FIELD event carries nothing that tells the two apart (see
// vstream-types.md). The constraint is visible in SHOW CREATE TABLE, which
// vtgate routes to the keyspace, so it is read once per table and kept until
// a DDL on the keyspace is seen. MySQL 8 sends Type JSON and needs no lookup.
type schemaCache struct {
	conn *vtgateconn.VTGateConn
	mu   sync.Mutex
	// tables maps "keyspace.table" to its JSON columns.
	tables map[string]map[string]bool
}

func newSchemaCache(conn *vtgateconn.VTGateConn) *schemaCache {
	return &schemaCache{conn: conn, tables: map[string]map[string]bool{}}
}

var jsonCheck = regexp.MustCompile("(?i)json_valid\\(`((?:[^`]|``)+)`\\)")

// jsonColumns returns the JSON columns of keyspace.table. A failed lookup is
// not cached, so a transient error costs a string-typed value once at worst
// rather than forever.
func (s *schemaCache) jsonColumns(ctx context.Context, keyspace, table string) (map[string]bool, error) {
	key := keyspace + "." + table
	s.mu.Lock()
	cols, ok := s.tables[key]
	s.mu.Unlock()
	if ok {
		return cols, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := s.conn.Session(keyspace+"@primary", nil).Execute(ctx, "show create table "+quoteIdent(table), nil, false)
	if err != nil {
		return nil, fmt.Errorf("source: read schema of %s: %w", key, err)
	}
	cols = map[string]bool{}
	for _, row := range res.Rows {
		if len(row) < 2 {
			continue
		}
		for _, m := range jsonCheck.FindAllStringSubmatch(row[1].ToString(), -1) {
			cols[unquoteIdent(m[1])] = true
		}
	}
	s.mu.Lock()
	s.tables[key] = cols
	s.mu.Unlock()
	return cols, nil
}

// invalidate forgets the keyspace's tables after a DDL.
func (s *schemaCache) invalidate(keyspace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := keyspace + "."
	for k := range s.tables {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			delete(s.tables, k)
		}
	}
}

func quoteIdent(s string) string {
	out := make([]byte, 0, len(s)+2)
	out = append(out, '`')
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			out = append(out, '`')
		}
		out = append(out, s[i])
	}
	return string(append(out, '`'))
}

func unquoteIdent(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if s[i] == '`' && i+1 < len(s) && s[i+1] == '`' {
			i++
		}
	}
	return string(out)
}
