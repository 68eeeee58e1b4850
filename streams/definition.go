// Package streams holds stream definitions: what a named stream reads
// (keyspace, tables or Vitess filter rules), where a new reader starts, and
// what happens when a cursor cannot be resumed exactly.
package streams

import (
	"fmt"
	"regexp"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// Start values.
const (
	StartNow      = "now"
	StartSnapshot = "snapshot"
)

// OnGap values: what a reader gets when its cursor cannot be resumed exactly
// (DESIGN §4).
const (
	OnGapResync = "resync"
	OnGapFail   = "fail"
)

// Definition is a stream as users define it.
type Definition struct {
	Name     string `json:"name" yaml:"name"`
	Keyspace string `json:"keyspace" yaml:"keyspace"`
	// Tables is the simple form: plain table names, all columns.
	Tables []string `json:"tables,omitempty" yaml:"tables,omitempty"`
	// Rules is the Vitess form: match a table name or /regex/, with an
	// optional `select … from t where …` filter.
	Rules     []Rule    `json:"rules,omitempty" yaml:"rules,omitempty"`
	Start     string    `json:"start" yaml:"start"`
	OnGap     string    `json:"on_gap" yaml:"on_gap"`
	CreatedAt time.Time `json:"created_at" yaml:"-"`
	// Moves are the MoveTables cutovers the stream followed, oldest
	// first; Keyspace is where its tables are now (moves.go).
	Moves []Move `json:"moves,omitempty" yaml:"-"`
	// Blocked is set when a MoveTables cutover moved only some of the
	// stream's tables: it cannot follow them and says why (block.go).
	Blocked *Block `json:"blocked,omitempty" yaml:"-"`
}

// Rule is one Vitess filter rule.
type Rule struct {
	Match  string `json:"match" yaml:"match"`
	Filter string `json:"filter,omitempty" yaml:"filter,omitempty"`
}

// ValidationError names the field that is wrong and why. Handlers turn it
// into a 400 with a stable code.
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	identRE = regexp.MustCompile(`^[A-Za-z0-9_$]{1,64}$`)
)

// ValidName reports whether s may name a stream or subscriber.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// Normalize fills defaults and validates d. It never contacts vtgate; see
// Checker for the checks that need the schema.
func (d *Definition) Normalize() error {
	// Set by the gateway only (a cutover it saw), never by a client.
	d.Blocked = nil
	if !ValidName(d.Name) {
		return invalid("name", "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
	}
	if !identRE.MatchString(d.Keyspace) {
		return invalid("keyspace", "must be a keyspace name")
	}
	switch d.Start {
	case "":
		d.Start = StartNow
	case StartNow, StartSnapshot:
	default:
		return invalid("start", "must be %q or %q", StartNow, StartSnapshot)
	}
	switch d.OnGap {
	case "":
		d.OnGap = OnGapResync
	case OnGapResync, OnGapFail:
	default:
		return invalid("on_gap", "must be %q or %q", OnGapResync, OnGapFail)
	}
	if len(d.Tables) == 0 && len(d.Rules) == 0 {
		return invalid("tables", "give tables or rules")
	}
	if len(d.Tables)+len(d.Rules) > 256 {
		return invalid("rules", "at most 256 tables and rules")
	}
	for i, t := range d.Tables {
		if !identRE.MatchString(t) {
			return invalid(fmt.Sprintf("tables[%d]", i), "%q is not a plain table name (use rules for patterns)", t)
		}
	}
	for i, r := range d.Rules {
		if err := validateRule(r); err != nil {
			return invalid(fmt.Sprintf("rules[%d]", i), "%s", err.Error())
		}
	}
	return nil
}

// VitessRules returns the filter rules sent to vtgate. Plain table names
// become `select * from t`: vtgate accepts an empty filter for them and then
// kills the stream at the first row ("Query was empty").
func (d *Definition) VitessRules() []*binlogdatapb.Rule {
	out := make([]*binlogdatapb.Rule, 0, len(d.Tables)+len(d.Rules))
	for _, t := range d.Tables {
		out = append(out, &binlogdatapb.Rule{Match: t, Filter: "select * from " + quoteIdent(t)})
	}
	for _, r := range d.Rules {
		f := r.Filter
		if f == "" && !isRegexMatch(r.Match) {
			f = "select * from " + quoteIdent(r.Match)
		}
		out = append(out, &binlogdatapb.Rule{Match: r.Match, Filter: f})
	}
	return out
}

// TableNames lists the plain table names the definition names (tables and
// non-regex rules), for schema checks.
func (d *Definition) TableNames() []string {
	out := append([]string(nil), d.Tables...)
	for _, r := range d.Rules {
		if !isRegexMatch(r.Match) {
			out = append(out, r.Match)
		}
	}
	return out
}

// quoteIdent quotes a table name for a VStream filter query.
func quoteIdent(ident string) string { return "`" + ident + "`" }
