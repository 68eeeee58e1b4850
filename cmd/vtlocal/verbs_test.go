package main

import (
	"context"
	"errors"
	"regexp"
	"testing"
)

// The usage lists every verb the command has, and only those.
func TestUsageListsVerbs(t *testing.T) {
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z-]+)\b`).FindAllStringSubmatch(usage[:regexp.MustCompile(`\nflags:`).FindStringIndex(usage)[0]], -1) {
		listed[m[1]] = true
	}
	for name := range verbs {
		if !listed[name] {
			t.Errorf("verb %q is not in the usage", name)
		}
	}
	for name := range listed {
		if _, ok := verbs[name]; !ok {
			t.Errorf("the usage lists %q, which is no verb", name)
		}
	}
}

// Wrong arguments are usage errors, found before the cluster is touched
// (the cluster is nil here).
func TestVerbArguments(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"}, {"up", "x"}, {"reshard", "customer", "w"}, {"prs"}, {"prs", "customer"},
		{"ers", "customer/0", "x", "y"}, {"stop-tablet", "x"}, {"kill-mysqld", "zone2-x"}, {"remove-tablet"},
	} {
		if err := runVerb(context.Background(), nil, args[0], args[1:]); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
