package streams

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"vitess.io/vitess/go/vt/key"
	"vitess.io/vitess/go/vt/sqlparser"
)

// The checks below mirror what vttablet's vstreamer planbuilder accepts
// (go/vt/vttablet/tabletserver/vstreamer/planbuilder.go). vtgate accepts any
// filter when the VStream opens and the tablet only builds the plan at the
// first matching row, so a filter it cannot plan kills a stream that looked
// healthy. Refusing such filters up front is the only safe place.

var parser = sqlparser.NewTestParser()

func isRegexMatch(m string) bool { return strings.HasPrefix(m, "/") }

func validateRule(r Rule) error {
	if r.Match == "" {
		return errors.New("match is empty")
	}
	if isRegexMatch(r.Match) {
		if _, err := regexp.Compile(strings.Trim(r.Match, "/")); err != nil {
			return fmt.Errorf("match is not a valid regular expression: %v", err)
		}
		if r.Filter == "" {
			return nil
		}
		// With a regex match the filter may only be a key range.
		krs, err := key.ParseShardingSpec(r.Filter)
		if err != nil || len(krs) != 1 {
			return fmt.Errorf("with a /regex/ match the filter must be empty or one key range such as \"-80\"")
		}
		return nil
	}
	if !identRE.MatchString(r.Match) {
		return fmt.Errorf("match %q must be a table name or a /regex/", r.Match)
	}
	if r.Filter == "" {
		return nil
	}
	return validateSelect(r.Match, r.Filter)
}

func validateSelect(table, query string) error {
	stmt, err := parser.Parse(query)
	if err != nil {
		return fmt.Errorf("filter does not parse: %v", err)
	}
	sel, ok := stmt.(*sqlparser.Select)
	if !ok {
		return errors.New("filter must be a SELECT")
	}
	if len(sel.From) != 1 {
		return errors.New("filter must select from exactly one table")
	}
	ate, ok := sel.From[0].(*sqlparser.AliasedTableExpr)
	if !ok {
		return errors.New("filter must select from a plain table (no joins)")
	}
	tn, ok := ate.Expr.(sqlparser.TableName)
	if !ok || !tn.Qualifier.IsEmpty() {
		return errors.New("filter must select from an unqualified table name")
	}
	if tn.Name.String() != table {
		return fmt.Errorf("filter selects from %q but the rule matches %q", tn.Name.String(), table)
	}
	if sel.Distinct || sel.GroupBy != nil || sel.Having != nil || len(sel.OrderBy) > 0 || sel.Limit != nil || sel.With != nil {
		return errors.New("filter supports only columns and a WHERE clause (no DISTINCT, GROUP BY, HAVING, ORDER BY, LIMIT, WITH)")
	}
	if err := validateColumns(sel.GetColumns()); err != nil {
		return err
	}
	if sel.Where != nil {
		for _, e := range splitAnd(nil, sel.Where.Expr) {
			if err := validateCondition(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateColumns(exprs []sqlparser.SelectExpr) error {
	if len(exprs) == 0 {
		return errors.New("filter selects nothing")
	}
	if _, ok := exprs[0].(*sqlparser.StarExpr); ok {
		if len(exprs) != 1 {
			return errors.New("'*' cannot be combined with other columns")
		}
		return nil
	}
	for _, e := range exprs {
		ae, ok := e.(*sqlparser.AliasedExpr)
		if !ok {
			return fmt.Errorf("unsupported select expression %s", sqlparser.String(e))
		}
		switch x := ae.Expr.(type) {
		case *sqlparser.ColName:
			if !x.Qualifier.IsEmpty() {
				return fmt.Errorf("column %s must not be qualified", sqlparser.String(x))
			}
		case *sqlparser.FuncExpr:
			if !x.Name.EqualString("keyspace_id") || len(x.Exprs) != 0 {
				return fmt.Errorf("unsupported function %s (only columns and keyspace_id())", sqlparser.String(x))
			}
		default:
			return fmt.Errorf("unsupported select expression %s (only columns and keyspace_id())", sqlparser.String(ae.Expr))
		}
	}
	return nil
}

func splitAnd(out []sqlparser.Expr, e sqlparser.Expr) []sqlparser.Expr {
	if and, ok := e.(*sqlparser.AndExpr); ok {
		return splitAnd(splitAnd(out, and.Left), and.Right)
	}
	return append(out, e)
}

const literalHint = "the right side must be a literal (negative numbers are not literals to VStream: write `col < 0`, not `col = -1`)"

func validateCondition(e sqlparser.Expr) error {
	switch x := e.(type) {
	case *sqlparser.ComparisonExpr:
		if err := plainColumn(x.Left, e); err != nil {
			return err
		}
		switch x.Operator {
		case sqlparser.EqualOp, sqlparser.LessThanOp, sqlparser.LessEqualOp, sqlparser.GreaterThanOp,
			sqlparser.GreaterEqualOp, sqlparser.NotEqualOp:
			if _, ok := x.Right.(*sqlparser.Literal); !ok {
				return fmt.Errorf("condition %s: %s", sqlparser.String(e), literalHint)
			}
		case sqlparser.InOp:
			tuple, ok := x.Right.(sqlparser.ValTuple)
			if !ok {
				return fmt.Errorf("condition %s: IN needs a list of literals", sqlparser.String(e))
			}
			for _, v := range tuple {
				if _, ok := v.(*sqlparser.Literal); !ok {
					return fmt.Errorf("condition %s: %s", sqlparser.String(e), literalHint)
				}
			}
		default:
			return fmt.Errorf("condition %s: operator %s is not supported (=, !=, <, <=, >, >=, IN)", sqlparser.String(e), x.Operator.ToString())
		}
	case *sqlparser.IsExpr:
		if err := plainColumn(x.Left, e); err != nil {
			return err
		}
		if x.Right != sqlparser.IsNullOp && x.Right != sqlparser.IsNotNullOp {
			return fmt.Errorf("condition %s: only IS NULL and IS NOT NULL", sqlparser.String(e))
		}
	case *sqlparser.BetweenExpr:
		if err := plainColumn(x.Left, e); err != nil {
			return err
		}
		_, ok1 := x.From.(*sqlparser.Literal)
		_, ok2 := x.To.(*sqlparser.Literal)
		if !ok1 || !ok2 {
			return fmt.Errorf("condition %s: %s", sqlparser.String(e), literalHint)
		}
	case *sqlparser.FuncExpr:
		if !x.Name.EqualString("in_keyrange") {
			return fmt.Errorf("condition %s: the only function allowed is in_keyrange()", sqlparser.String(e))
		}
	default:
		return fmt.Errorf("condition %s is not supported: use AND-ed comparisons of a column with a literal, IN, BETWEEN, IS [NOT] NULL or in_keyrange()", sqlparser.String(e))
	}
	return nil
}

func plainColumn(e sqlparser.Expr, cond sqlparser.Expr) error {
	c, ok := e.(*sqlparser.ColName)
	if !ok || !c.Qualifier.IsEmpty() {
		return fmt.Errorf("condition %s: the left side must be an unqualified column", sqlparser.String(cond))
	}
	return nil
}

// Columns returns the columns a filter names (select list and WHERE), for a
// schema check. nil means all columns ("*" or no filter).
func (r Rule) Columns() []string {
	if r.Filter == "" || isRegexMatch(r.Match) {
		return nil
	}
	stmt, err := parser.Parse(r.Filter)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	_ = sqlparser.Walk(func(n sqlparser.SQLNode) (bool, error) {
		if c, ok := n.(*sqlparser.ColName); ok {
			name := c.Name.String()
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
		return true, nil
	}, stmt)
	return out
}
