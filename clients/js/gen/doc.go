package main

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

const (
	// docWidth is where long description lines are wrapped; the spec's own
	// lines stay under it, single-line descriptions often do not.
	docWidth = 96
	// docMaxLines bounds a comment. A longer description is cut at a
	// paragraph break, never inside a paragraph, so what remains stays true;
	// the cut says where the rest is.
	docMaxLines = 40
)

// tags are the JSDoc tags of what a schema says besides its type.
func tags(s *openapi3.Schema) []string {
	var t []string
	if s.Format != "" {
		t = append(t, "@format "+s.Format)
	}
	if s.Default != nil {
		if b, err := json.Marshal(s.Default); err == nil {
			t = append(t, "@default "+string(b))
		}
	}
	if s.Deprecated {
		t = append(t, "@deprecated")
	}
	return t
}

// jsdoc returns desc and tags as a JSDoc comment at indentation level ind,
// or "" when there is nothing to say.
func jsdoc(desc string, tags []string, ind int) string {
	lines := append(docLines(desc), tags...)
	if len(lines) == 0 {
		return ""
	}
	p := pad(ind)
	for i, l := range lines {
		// "*/" would end the comment early.
		lines[i] = strings.ReplaceAll(l, "*/", `*\/`)
	}
	if len(lines) == 1 {
		return p + "/** " + lines[0] + " */\n"
	}
	var b strings.Builder
	b.WriteString(p + "/**\n")
	for _, l := range lines {
		if l == "" {
			b.WriteString(p + " *\n")
		} else {
			b.WriteString(p + " * " + l + "\n")
		}
	}
	b.WriteString(p + " */\n")
	return b.String()
}

// docLines splits a description into comment lines: trimmed, long lines
// wrapped (not table rows, which wrapping would break), and cut at a
// paragraph break if very long.
func docLines(desc string) []string {
	desc = strings.TrimSpace(desc)
	if desc == "" {
		return nil
	}
	var out []string
	for _, line := range strings.Split(desc, "\n") {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
		if utf8.RuneCountInString(line) <= docWidth || strings.HasPrefix(strings.TrimSpace(line), "|") {
			out = append(out, line)
			continue
		}
		out = append(out, wrap(line, docWidth)...)
	}
	if len(out) <= docMaxLines {
		return out
	}
	for i := docMaxLines; i > 0; i-- {
		if out[i] == "" {
			return append(out[:i+1], "(Continued in openapi.yaml.)")
		}
	}
	return out
}

// wrap breaks line at spaces into lines of at most width runes (a longer
// word stays whole), keeping its indentation on every line.
func wrap(line string, width int) []string {
	lead := line[:len(line)-len(strings.TrimLeftFunc(line, unicode.IsSpace))]
	var out []string
	cur := lead
	for _, w := range strings.Fields(line) {
		if cur != lead && utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) > width {
			out = append(out, cur)
			cur = lead
		}
		if cur != lead {
			cur += " "
		}
		cur += w
	}
	return append(out, cur)
}
