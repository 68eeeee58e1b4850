package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// unsupported reports the keywords of s that would change its TypeScript
// type but have no translation here. Failing on them beats emitting a type
// looser or stricter than the spec. Validation-only keywords (pattern,
// maxLength, format, …) do not change the type and pass.
func unsupported(s *openapi3.Schema) error {
	var kw []string
	add := func(cond bool, name string) {
		if cond {
			kw = append(kw, name)
		}
	}
	add(len(s.AnyOf) > 0, "anyOf")
	add(s.Not != nil, "not")
	add(s.If != nil || s.Then != nil || s.Else != nil, "if/then/else")
	add(len(s.PrefixItems) > 0, "prefixItems")
	add(s.Contains != nil, "contains")
	add(len(s.PatternProperties) > 0, "patternProperties")
	add(len(s.DependentSchemas) > 0, "dependentSchemas")
	add(len(s.DependentRequired) > 0, "dependentRequired")
	add(s.PropertyNames != nil, "propertyNames")
	add(s.UnevaluatedItems.Has != nil || s.UnevaluatedItems.Schema != nil, "unevaluatedItems")
	add(s.UnevaluatedProperties.Has != nil || s.UnevaluatedProperties.Schema != nil, "unevaluatedProperties")
	add(s.DynamicRef != "", "$dynamicRef")
	add(s.Always != nil, "a boolean schema")
	add(s.Nullable, "nullable (write type: [..., 'null'])")
	add(s.Discriminator != nil && len(s.OneOf) == 0, "discriminator without oneOf")
	combined := 0
	for _, c := range []bool{len(s.AllOf) > 0, s.Const != nil, len(s.Enum) > 0, len(s.OneOf) > 0} {
		if c {
			combined++
		}
	}
	add(combined > 1, "more than one of allOf, const, enum and oneOf")
	if len(kw) > 0 {
		return fmt.Errorf("not supported: %s", strings.Join(kw, ", "))
	}
	return nil
}

// hasShape reports whether s says something about its instances besides
// its combinators: then a oneOf cannot simply become a union, nor an allOf
// of one schema that schema.
func hasShape(s *openapi3.Schema) bool {
	return !s.Type.IsEmpty() || len(s.Properties) > 0 || len(s.Required) > 0 ||
		s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil ||
		s.Items != nil || len(s.Enum) > 0 || s.Const != nil
}

// mergeable reports whether s is an allOf to merge into one object.
func mergeable(s *openapi3.Schema) bool {
	return len(s.AllOf) > 1 || (len(s.AllOf) == 1 && hasShape(s))
}

// flatten merges an allOf of object schemas (and s's own properties and
// required) into one object schema. Stream, for one, is StreamDefinition
// with more properties required; a merged interface says so directly.
func (g *generator) flatten(path string, s *openapi3.Schema) (*openapi3.Schema, error) {
	own := *s
	own.AllOf = nil
	parts := []*openapi3.Schema{&own}
	for _, m := range s.AllOf {
		if m == nil || m.Value == nil {
			return nil, fmt.Errorf("%s: allOf: missing schema", path)
		}
		parts = append(parts, m.Value)
	}
	out := &openapi3.Schema{
		Type:        &openapi3.Types{openapi3.TypeObject},
		Description: s.Description,
		Properties:  openapi3.Schemas{},
	}
	for _, p := range parts {
		if len(p.AllOf) > 0 {
			m, err := g.flatten(path, p)
			if err != nil {
				return nil, err
			}
			p = m
		}
		if err := unsupported(p); err != nil {
			return nil, fmt.Errorf("%s: allOf: %w", path, err)
		}
		if (!p.Type.IsEmpty() && !p.Type.Is(openapi3.TypeObject)) || len(p.OneOf) > 0 || len(p.Enum) > 0 || p.Const != nil || p.AdditionalProperties.Schema != nil {
			return nil, fmt.Errorf("%s: allOf of anything but plain object schemas is not supported", path)
		}
		if ap := p.AdditionalProperties.Has; ap != nil && !*ap {
			out.AdditionalProperties.Has = ap
		}
		for name, ps := range p.Properties {
			if prev, ok := out.Properties[name]; ok && prev != ps {
				return nil, fmt.Errorf("%s.%s: defined by more than one allOf member", path, name)
			}
			out.Properties[name] = ps
		}
		out.Required = append(out.Required, p.Required...)
	}
	slices.Sort(out.Required)
	out.Required = slices.Compact(out.Required)
	return out, nil
}

// literal writes a const or enum value as a TypeScript literal type.
func literal(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case string:
		return jsonString(v), nil
	}
	return "", fmt.Errorf("no literal type for %T value %v", v, v)
}

// jsonString quotes s. A JSON string is a valid TypeScript string literal;
// HTML escaping would only make it harder to read.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// isUnion reports whether t is a union at its top level, which needs
// parentheses before [].
func isUnion(t string) bool {
	depth := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '"': // skip a string literal, whose contents are not syntax
			for i++; i < len(t) && t[i] != '"'; i++ {
				if t[i] == '\\' {
					i++
				}
			}
		case '{', '(', '[', '<':
			depth++
		case '}', ')', ']', '>':
			depth--
		case '|':
			if depth == 0 {
				return true
			}
		}
	}
	return false
}

var identRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func isIdent(s string) bool { return identRE.MatchString(s) }

// reserved are the words a type alias or interface cannot be named.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`break case catch class const continue debugger default delete do
		else enum export extends false finally for function if import in instanceof new null return
		super switch this throw true try typeof var void while with any unknown never string number
		boolean object symbol bigint undefined`) {
		m[w] = true
	}
	return m
}()

// propName writes a property name, quoted unless it is an identifier.
func propName(s string) string {
	if isIdent(s) {
		return s
	}
	return jsonString(s)
}

func pad(ind int) string { return strings.Repeat("  ", ind) }
