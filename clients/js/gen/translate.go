package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

const componentPrefix = "#/components/schemas/"

// generator translates component schemas into TypeScript declarations.
// Paths in its errors ("ChangeEvent.key", "Batch.events[]") name the schema
// a failure comes from; the same paths select keyNames.
type generator struct {
	schemas  openapi3.Schemas
	keyNames map[string]string
	usedKeys map[string]bool
	queue    []string // components referred to and not declared yet
	queued   map[string]bool
}

// declare returns the declarations of roots and of every schema they refer
// to, sorted by name so that the output only changes with the spec.
func declare(schemas openapi3.Schemas, roots []string, keyNames map[string]string) (string, error) {
	g := &generator{schemas: schemas, keyNames: keyNames, usedKeys: map[string]bool{}, queued: map[string]bool{}}
	for _, r := range roots {
		g.need(r)
	}
	decls := map[string]string{}
	for len(g.queue) > 0 {
		name := g.queue[0]
		g.queue = g.queue[1:]
		d, err := g.decl(name)
		if err != nil {
			return "", err
		}
		decls[name] = d
	}
	for _, path := range slices.Sorted(maps.Keys(keyNames)) {
		if !g.usedKeys[path] {
			return "", fmt.Errorf("key name for %s: no such map-like property", path)
		}
	}
	var b strings.Builder
	for i, name := range slices.Sorted(maps.Keys(decls)) {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(decls[name])
	}
	return b.String(), nil
}

func (g *generator) need(name string) {
	if !g.queued[name] {
		g.queued[name] = true
		g.queue = append(g.queue, name)
	}
}

// decl declares one component: an interface for an object, else a type
// alias.
func (g *generator) decl(name string) (string, error) {
	ref := g.schemas[name]
	if ref == nil || ref.Value == nil {
		return "", fmt.Errorf("components.schemas.%s: no such schema", name)
	}
	if !isIdent(name) || reserved[name] {
		return "", fmt.Errorf("components.schemas.%s: not usable as a TypeScript type name", name)
	}
	s := ref.Value
	if ref.Ref == "" && mergeable(s) {
		m, err := g.flatten(name, s)
		if err != nil {
			return "", err
		}
		s = m
	}
	doc := jsdoc(s.Description, tags(s), 0)
	if ref.Ref == "" && s.Type.Is(openapi3.TypeObject) && len(s.OneOf) == 0 && len(s.Enum) == 0 && s.Const == nil {
		if err := unsupported(s); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		body, err := g.object(name, s, 0)
		if err != nil {
			return "", err
		}
		return doc + "export interface " + name + " " + body + "\n", nil
	}
	t, err := g.expr(name, &openapi3.SchemaRef{Ref: ref.Ref, Value: s}, 0)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(t, "\n") {
		t = " " + t
	}
	return doc + "export type " + name + " =" + t + ";\n", nil
}

// expr returns the TypeScript type of r, written for indentation level ind.
func (g *generator) expr(path string, r *openapi3.SchemaRef, ind int) (string, error) {
	if r == nil || (r.Ref == "" && r.Value == nil) {
		return "", fmt.Errorf("%s: missing schema", path)
	}
	if r.Ref != "" {
		name, ok := strings.CutPrefix(r.Ref, componentPrefix)
		if !ok || name == "" || strings.Contains(name, "/") {
			return "", fmt.Errorf("%s: $ref %q does not name a components.schemas entry", path, r.Ref)
		}
		g.need(name)
		return name, nil
	}
	s := r.Value
	if err := unsupported(s); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case len(s.AllOf) == 1 && !hasShape(s):
		// allOf wrapping one schema only adds annotations (a description
		// next to a $ref): the type is that schema's.
		return g.expr(path, s.AllOf[0], ind)
	case len(s.AllOf) > 0:
		m, err := g.flatten(path, s)
		if err != nil {
			return "", err
		}
		return g.typed(path, m, ind)
	case s.Const != nil:
		return literal(s.Const)
	case len(s.Enum) > 0:
		parts := make([]string, 0, len(s.Enum))
		for _, v := range s.Enum {
			l, err := literal(v)
			if err != nil {
				return "", fmt.Errorf("%s: enum: %w", path, err)
			}
			parts = append(parts, l)
		}
		return strings.Join(slices.Compact(parts), " | "), nil
	case len(s.OneOf) > 0:
		return g.oneOf(path, s, ind)
	}
	return g.typed(path, s, ind)
}

// oneOf returns the union of s's members. A discriminator is checked, not
// just trusted: TypeScript narrows the union by that property only if every
// member requires it with a distinct literal value.
func (g *generator) oneOf(path string, s *openapi3.Schema, ind int) (string, error) {
	if hasShape(s) {
		return "", fmt.Errorf("%s: oneOf next to type, properties or required is not supported", path)
	}
	if s.Discriminator != nil {
		if err := checkDiscriminator(path, s); err != nil {
			return "", err
		}
	}
	var parts []string
	null := false
	for _, m := range s.OneOf {
		t, err := g.expr(path, m, ind)
		if err != nil {
			return "", err
		}
		if t == "null" {
			// Last, where it reads as "or nothing", as with type lists.
			null = true
			continue
		}
		parts = append(parts, t)
	}
	if null {
		parts = append(parts, "null")
	}
	return union(parts, ind), nil
}

// union joins types with |. A long union of one-line types declared at the
// top level gets one member a line, as the Event union does.
func union(parts []string, ind int) string {
	t := strings.Join(parts, " | ")
	if ind > 0 || len(t) <= 80 || strings.Contains(t, "\n") {
		return t
	}
	return "\n  | " + strings.Join(parts, "\n  | ")
}

func checkDiscriminator(path string, s *openapi3.Schema) error {
	prop := s.Discriminator.PropertyName
	byValue := map[string]string{} // discriminator value → member $ref
	for _, m := range s.OneOf {
		if m.Ref == "" || m.Value == nil {
			return fmt.Errorf("%s: a discriminated oneOf member must be a $ref", path)
		}
		p := m.Value.Properties[prop]
		if p == nil || p.Value == nil || !slices.Contains(m.Value.Required, prop) {
			return fmt.Errorf("%s: %s does not require discriminator property %q", path, m.Ref, prop)
		}
		v, ok := p.Value.Const.(string)
		if !ok && len(p.Value.Enum) == 1 {
			v, ok = p.Value.Enum[0].(string)
		}
		if !ok {
			return fmt.Errorf("%s: %s.%s is not one constant string", path, m.Ref, prop)
		}
		if other, dup := byValue[v]; dup {
			return fmt.Errorf("%s: %s and %s both have %s %q", path, other, m.Ref, prop, v)
		}
		byValue[v] = m.Ref
	}
	mapping := s.Discriminator.Mapping
	for _, v := range slices.Sorted(maps.Keys(mapping)) {
		switch got := byValue[v]; {
		case got == "":
			return fmt.Errorf("%s: discriminator maps %q to %s, but no member has %s %q", path, v, mapping[v].Ref, prop, v)
		case got != mapping[v].Ref:
			return fmt.Errorf("%s: discriminator maps %q to %s, but %s has it", path, v, mapping[v].Ref, got)
		}
	}
	if len(mapping) > 0 && len(mapping) != len(byValue) {
		return fmt.Errorf("%s: discriminator mapping has %d entries for %d members", path, len(mapping), len(byValue))
	}
	return nil
}

// typed translates a schema by its type keyword; a list of types is a union.
func (g *generator) typed(path string, s *openapi3.Schema, ind int) (string, error) {
	types := s.Type.Slice()
	if len(types) == 0 {
		return "", fmt.Errorf("%s: schema has no type (nor $ref, const, enum, oneOf or allOf)", path)
	}
	var parts []string
	for _, t := range types {
		var ts string
		switch t {
		case openapi3.TypeString:
			ts = "string"
		case openapi3.TypeInteger, openapi3.TypeNumber:
			ts = "number"
		case openapi3.TypeBoolean:
			ts = "boolean"
		case openapi3.TypeNull:
			ts = "null"
		case openapi3.TypeArray:
			if s.Items == nil {
				return "", fmt.Errorf("%s: array without items", path)
			}
			it, err := g.expr(path+"[]", s.Items, ind)
			if err != nil {
				return "", err
			}
			if isUnion(it) {
				it = "(" + it + ")"
			}
			ts = it + "[]"
		case openapi3.TypeObject:
			o, err := g.object(path, s, ind)
			if err != nil {
				return "", err
			}
			ts = o
		default:
			return "", fmt.Errorf("%s: unknown type %q", path, t)
		}
		if !slices.Contains(parts, ts) {
			parts = append(parts, ts)
		}
	}
	return strings.Join(parts, " | "), nil
}

// object returns an object type literal: its properties sorted by name,
// optional unless required, and an index signature for additionalProperties.
func (g *generator) object(path string, s *openapi3.Schema, ind int) (string, error) {
	for _, r := range s.Required {
		if s.Properties[r] == nil {
			return "", fmt.Errorf("%s: required property %q has no schema", path, r)
		}
	}
	index, err := g.index(path, s, ind)
	if err != nil {
		return "", err
	}
	if len(s.Properties) == 0 {
		switch {
		case index == "":
			return "Record<string, never>", nil
		case !strings.Contains(index, "\n"):
			return "{ " + index + " }", nil
		}
		return "{\n" + pad(ind+1) + index + ";\n" + pad(ind) + "}", nil
	}
	if index != "" {
		return "", fmt.Errorf("%s: properties next to an additionalProperties schema are not supported", path)
	}
	var b strings.Builder
	b.WriteString("{\n")
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[name]
		t, err := g.expr(path+"."+name, p, ind+1)
		if err != nil {
			return "", err
		}
		b.WriteString(g.propDoc(p, ind+1))
		opt := "?"
		if slices.Contains(s.Required, name) {
			opt = ""
		}
		fmt.Fprintf(&b, "%s%s%s: %s;\n", pad(ind+1), propName(name), opt, t)
	}
	b.WriteString(pad(ind) + "}")
	return b.String(), nil
}

// propDoc documents a property. A $ref property shows only a description
// written next to the $ref: the referenced type carries its own.
func (g *generator) propDoc(p *openapi3.SchemaRef, ind int) string {
	if p.Ref == "" {
		return jsdoc(p.Value.Description, tags(p.Value), ind)
	}
	target := g.schemas[strings.TrimPrefix(p.Ref, componentPrefix)]
	if p.Value == nil || target == nil || target.Value == nil || p.Value.Description == target.Value.Description {
		return ""
	}
	return jsdoc(p.Value.Description, nil, ind)
}

// index returns the index signature of s, or "" when it has none: an object
// without properties takes any key unless additionalProperties is false.
func (g *generator) index(path string, s *openapi3.Schema, ind int) (string, error) {
	ap := s.AdditionalProperties
	switch {
	case ap.Schema != nil:
		t, err := g.expr(path+"{}", ap.Schema, ind+1)
		if err != nil {
			return "", err
		}
		return "[" + g.keyName(path) + ": string]: " + t, nil
	case ap.Has != nil && !*ap.Has, len(s.Properties) > 0:
		return "", nil
	}
	return "[" + g.keyName(path) + ": string]: unknown", nil
}

func (g *generator) keyName(path string) string {
	if k, ok := g.keyNames[path]; ok {
		g.usedKeys[path] = true
		return k
	}
	return "key"
}
