package streams

import (
	"strings"
	"testing"
)

func TestNormalizeDefaults(t *testing.T) {
	d := &Definition{Name: "orders", Keyspace: "customer", Tables: []string{"corder"}}
	if err := d.Normalize(); err != nil {
		t.Fatal(err)
	}
	if d.Start != StartNow || d.OnGap != OnGapResync {
		t.Fatalf("defaults not applied: %+v", d)
	}
	rules := d.VitessRules()
	if len(rules) != 1 || rules[0].Match != "corder" || rules[0].Filter != "select * from `corder`" {
		t.Fatalf("plain table must become select *: %v", rules)
	}
}

func TestRegexRuleKeepsEmptyFilter(t *testing.T) {
	d := &Definition{Name: "all", Keyspace: "customer", Rules: []Rule{{Match: "/.*"}}}
	if err := d.Normalize(); err != nil {
		t.Fatal(err)
	}
	if r := d.VitessRules()[0]; r.Filter != "" {
		t.Fatalf("regex rule got filter %q", r.Filter)
	}
}

func TestNormalizeRejects(t *testing.T) {
	base := func() *Definition {
		return &Definition{Name: "s", Keyspace: "customer", Tables: []string{"customer"}}
	}
	for name, tc := range map[string]struct {
		mut   func(d *Definition)
		field string
		msg   string
	}{
		"bad name":        {func(d *Definition) { d.Name = "a b" }, "name", "characters"},
		"empty name":      {func(d *Definition) { d.Name = "" }, "name", ""},
		"bad keyspace":    {func(d *Definition) { d.Keyspace = "x;drop" }, "keyspace", ""},
		"bad start":       {func(d *Definition) { d.Start = "yesterday" }, "start", "now"},
		"bad on_gap":      {func(d *Definition) { d.OnGap = "ignore" }, "on_gap", "resync"},
		"no tables":       {func(d *Definition) { d.Tables = nil }, "tables", "give tables"},
		"table pattern":   {func(d *Definition) { d.Tables = []string{"cust%"} }, "tables[0]", "plain table"},
		"bad regex":       {func(d *Definition) { d.Rules = []Rule{{Match: "/(["}} }, "rules[0]", "regular expression"},
		"regex filter":    {func(d *Definition) { d.Rules = []Rule{{Match: "/.*", Filter: "select * from t"}} }, "rules[0]", "key range"},
		"not select":      {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "delete from t"}} }, "rules[0]", "SELECT"},
		"wrong table":     {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from u"}} }, "rules[0]", "selects from"},
		"join":            {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t join u on t.a=u.a"}} }, "rules[0]", "plain table"},
		"qualified":       {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from ks.t"}} }, "rules[0]", "unqualified"},
		"negative":        {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t where id = -1"}} }, "rules[0]", "literal"},
		"const compare":   {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t where 1 != 1"}} }, "rules[0]", "left side"},
		"or":              {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t where a = 1 or b = 2"}} }, "rules[0]", "not supported"},
		"like":            {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t where a like 'x%'"}} }, "rules[0]", "operator"},
		"function":        {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select upper(a) from t"}} }, "rules[0]", "unsupported"},
		"order by":        {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t order by a"}} }, "rules[0]", "ORDER BY"},
		"star and column": {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select *, a from t"}} }, "rules[0]", "'*'"},
		"garbage":         {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select from where"}} }, "rules[0]", "parse"},
		"in non-literal":  {func(d *Definition) { d.Rules = []Rule{{Match: "t", Filter: "select * from t where a in (1, -2)"}} }, "rules[0]", "literal"},
	} {
		t.Run(name, func(t *testing.T) {
			d := base()
			tc.mut(d)
			err := d.Normalize()
			ve, ok := err.(*ValidationError)
			if !ok {
				t.Fatalf("want *ValidationError, got %T %v", err, err)
			}
			if ve.Field != tc.field || !strings.Contains(ve.Msg, tc.msg) {
				t.Fatalf("got %s: %s; want field %s mentioning %q", ve.Field, ve.Msg, tc.field, tc.msg)
			}
		})
	}
}

func TestValidFilters(t *testing.T) {
	for _, f := range []string{
		"select * from t",
		"select a, b from t where a < 0",
		"select a from t where a = 1 and b != 'x' and c in (1, 2) and d is not null and e between 1 and 5",
		"select a, keyspace_id() from t where in_keyrange('-80')",
		"select * from t where in_keyrange(a, 'xxhash', '80-')",
	} {
		d := &Definition{Name: "s", Keyspace: "ks", Rules: []Rule{{Match: "t", Filter: f}}}
		if err := d.Normalize(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestRuleColumns(t *testing.T) {
	r := Rule{Match: "t", Filter: "select a, b from t where c > 1 and a = 2"}
	got := strings.Join(r.Columns(), ",")
	if got != "a,b,c" {
		t.Fatalf("columns %q", got)
	}
	if (Rule{Match: "t"}).Columns() != nil {
		t.Fatal("no filter must mean all columns")
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add("t", "select * from t where a = 1")
	f.Add("/.*", "-80")
	f.Add("t", "select a from t where a in (1,2) and b is null")
	f.Fuzz(func(t *testing.T, match, filter string) {
		d := &Definition{Name: "s", Keyspace: "ks", Rules: []Rule{{Match: match, Filter: filter}}}
		if err := d.Normalize(); err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("non-validation error %T", err)
			}
			return
		}
		if len(d.VitessRules()) != 1 {
			t.Fatal("accepted rule lost")
		}
	})
}
