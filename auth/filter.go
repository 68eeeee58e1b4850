package auth

import (
	"strings"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// TableFilter decides which events a token may receive. Row events are
// kept only when their keyspace.table matches a glob of the "tables" claim.
// Control events without a table (reshard, snapshot_complete, heartbeat)
// carry no row data and are needed to resume correctly, so they always
// pass; those that name tables (moved, blocked, resync) pass with the
// tables of the scope only (control.go). DDL events carry statement text that can reveal another
// table's schema, so they pass only when the token may see every table of
// their keyspace ("*", "<keyspace>.*", "*.*").
//
// Every transport (pull, SSE, WebSocket) applies it before encoding;
// webhooks apply it to the scope stored with the webhook.
type TableFilter struct {
	all      bool
	patterns []string
	literal  []bool // pattern has no wildcard: compared, not matched
}

var allTables = &TableFilter{all: true, patterns: []string{"*"}}

// NewTableFilter compiles globs. No globs means no rows at all: a token
// without a "tables" claim sees only control events.
func NewTableFilter(globs []string) *TableFilter {
	f := &TableFilter{patterns: globs, literal: make([]bool, len(globs))}
	for i, g := range globs {
		if wildcardOnly(g) {
			f.all = true
		}
		f.literal[i] = !strings.ContainsAny(g, "*?")
	}
	return f
}

// AllowsAll reports whether the filter lets every event through.
func (f *TableFilter) AllowsAll() bool { return f.all }

// Allows reports whether rows of keyspace.table may be sent.
func (f *TableFilter) Allows(keyspace, table string) bool {
	if f.all {
		return true
	}
	for i, p := range f.patterns {
		if f.literal[i] {
			if len(p) == len(keyspace)+1+len(table) && p[len(keyspace)] == '.' &&
				p[:len(keyspace)] == keyspace && p[len(keyspace)+1:] == table {
				return true
			}
			continue
		}
		if matchQualified(p, keyspace, table) {
			return true
		}
	}
	return false
}

// AllowsKeyspace reports whether every table of keyspace is allowed.
func (f *TableFilter) AllowsKeyspace(keyspace string) bool { return f.allowsKeyspace(keyspace) }

// allowsKeyspace reports whether every table of keyspace is allowed.
func (f *TableFilter) allowsKeyspace(keyspace string) bool {
	if f.all {
		return true
	}
	for _, p := range f.patterns {
		for i := 0; i < len(p); i++ {
			if p[i] == '.' && wildcardOnly(p[i+1:]) && matchGlob(p[:i], keyspace) {
				return true
			}
		}
	}
	return false
}

// AllowsEvent reports whether e may be sent (a control event naming
// tables perhaps with fewer of them: see control.go).
func (f *TableFilter) AllowsEvent(e *event.Event) bool {
	keep, _ := f.scope(e)
	return keep
}

// scope reports whether e may be sent and, for a control event whose
// tables were narrowed, what to send instead.
func (f *TableFilter) scope(e *event.Event) (keep bool, narrowed *event.Event) {
	if f.all {
		return true, nil
	}
	switch {
	case e.Type == event.TypeDDL:
		return f.allowsKeyspace(e.Keyspace), nil
	case e.Table == "" && namesTables(e.Type):
		return f.scopeControl(e)
	case e.Table == "":
		return true, nil
	default:
		return f.Allows(e.Keyspace, e.Table), nil
	}
}

// Filter returns the events that may be sent. It never modifies events:
// when all pass unchanged it returns events itself (no allocation),
// otherwise a new slice, because the same transaction may be fanned out to
// other clients.
func (f *TableFilter) Filter(events []event.Event) []event.Event {
	if f.all {
		return events
	}
	for i := range events {
		keep, narrowed := f.scope(&events[i])
		if keep && narrowed == nil {
			continue
		}
		out := make([]event.Event, i, len(events))
		copy(out, events[:i])
		for j := i; j < len(events); j++ {
			if j > i {
				keep, narrowed = f.scope(&events[j])
			}
			switch {
			case narrowed != nil:
				out = append(out, *narrowed)
			case keep:
				out = append(out, events[j])
			}
		}
		return out
	}
	return events
}
