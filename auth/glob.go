package auth

// Globs in the "streams" and "tables" claims use two wildcards: '*' matches
// any run of characters (dots included, so "*" alone matches every
// keyspace.table) and '?' exactly one. There are no character classes and
// no escapes: stream, keyspace and table names never need them, and a
// syntax without errors cannot make a token half-valid.

// matchGlob reports whether s matches pattern.
func matchGlob(pattern, s string) bool {
	return matchParts(pattern, s, "", false)
}

// matchQualified reports whether keyspace + "." + table matches pattern,
// without building that string: it runs once per event on the hot path.
func matchQualified(pattern, keyspace, table string) bool {
	return matchParts(pattern, keyspace, table, true)
}

// matchParts is the classic linear-time wildcard match (remember the last
// star, backtrack to it on a mismatch) over the virtual string a, or
// a + "." + b when dotted.
func matchParts(p, a, b string, dotted bool) bool {
	n := len(a)
	if dotted {
		n += 1 + len(b)
	}
	at := func(i int) byte {
		switch {
		case i < len(a):
			return a[i]
		case i == len(a):
			return '.'
		default:
			return b[i-len(a)-1]
		}
	}
	pi, si := 0, 0
	star, mark := -1, 0
	for si < n {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == at(si)):
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// wildcardOnly reports whether s is non-empty and all '*'.
func wildcardOnly(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '*' {
			return false
		}
	}
	return true
}
