package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUpToDate fails while the committed declarations are not what
// openapi.yaml yields, so that a change to the spec without regenerating
// breaks go test ./... rather than the JavaScript client.
func TestUpToDate(t *testing.T) {
	spec, err := os.ReadFile("../../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../src/events.d.ts")
	if err != nil {
		t.Fatalf("%v: run `go run ./clients/js/gen` in the repository root", err)
	}
	if string(got) != string(want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Fatalf("clients/js/src/events.d.ts is stale: run `go run ./clients/js/gen` in the repository root.\n"+
			"first difference, line %d:\n  committed: %s\n  generated: %s", i+1, line(gl), line(wl))
	}
}

// declareYAML declares roots from the component schemas given as YAML (at
// column 0) in an otherwise empty document.
func declareYAML(t *testing.T, schemas string, keys map[string]string, roots ...string) (string, error) {
	t.Helper()
	var b strings.Builder
	b.WriteString("openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\ncomponents:\n  schemas:\n")
	for _, l := range strings.Split(strings.TrimSpace(schemas), "\n") {
		b.WriteString("    " + l + "\n")
	}
	doc, err := load([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return declare(doc.Components.Schemas, roots, keys)
}

// mappingCases are small schemas and their exact declarations, one for each
// construct the generator translates.
var mappingCases = []struct {
	name, schemas string
	keys          map[string]string
	roots         []string
	want          string
}{{
	name: "const",
	schemas: `
Ping:
  type: object
  required: [type]
  properties:
    type: {const: ping}
    ok: {type: boolean, const: true}`,
	roots: []string{"Ping"},
	want:  "export interface Ping {\n  ok?: true;\n  type: \"ping\";\n}\n",
}, {
	name: "enum",
	schemas: `
Op: {type: string, enum: [insert, delete], description: What happened.}
Code: {type: integer, enum: [4000, 4001]}`,
	roots: []string{"Op", "Code"},
	want:  "export type Code = 4000 | 4001;\n\n/** What happened. */\nexport type Op = \"insert\" | \"delete\";\n",
}, {
	name: "nullable",
	schemas: `
Row:
  type: object
  required: [after]
  properties:
    after: {type: [object, 'null'], description: The row.}
    at: {type: [string, 'null'], format: date-time}`,
	keys:  map[string]string{"Row.after": "column"},
	roots: []string{"Row"},
	want: "export interface Row {\n  /** The row. */\n  after: { [column: string]: unknown } | null;\n" +
		"  /** @format date-time */\n  at?: string | null;\n}\n",
}, {
	name: "optional, maps, arrays",
	schemas: `
Thing:
  type: object
  description: A thing.
  required: [id]
  properties:
    id: {type: string}
    counts: {type: object, additionalProperties: {type: integer}}
    values: {type: array, items: {type: [number, 'null']}}
    pipes: {type: array, items: {enum: ['a|b']}}
    x-y: {type: string, default: z}`,
	roots: []string{"Thing"},
	want: "/** A thing. */\nexport interface Thing {\n  counts?: { [key: string]: number };\n  id: string;\n" +
		"  pipes?: \"a|b\"[];\n  values?: (number | null)[];\n  /** @default \"z\" */\n  \"x-y\"?: string;\n}\n",
}, {
	name: "ref",
	schemas: `
Cursor: {type: string, description: A cursor.}
Ack:
  type: object
  required: [cursor]
  properties:
    cursor: {$ref: '#/components/schemas/Cursor'}`,
	roots: []string{"Ack"},
	want:  "export interface Ack {\n  cursor: Cursor;\n}\n\n/** A cursor. */\nexport type Cursor = string;\n",
}, {
	name: "oneOf",
	schemas: `
A: {type: object, required: [type], properties: {type: {const: a}}}
B: {type: object, required: [type], properties: {type: {const: b}}}
AB:
  description: A or B.
  oneOf: [{$ref: '#/components/schemas/A'}, {$ref: '#/components/schemas/B'}]
  discriminator: {propertyName: type, mapping: {a: '#/components/schemas/A', b: '#/components/schemas/B'}}
Maybe:
  oneOf: [{type: 'null'}, {type: string}]`,
	roots: []string{"AB", "Maybe"},
	want: "export interface A {\n  type: \"a\";\n}\n\n/** A or B. */\nexport type AB = A | B;\n\n" +
		"export interface B {\n  type: \"b\";\n}\n\nexport type Maybe = string | null;\n",
}, {
	name: "allOf",
	schemas: `
Def: {type: object, required: [name], properties: {name: {type: string}, start: {type: string}}}
Stored:
  description: A stored Def.
  allOf: [{$ref: '#/components/schemas/Def'}, {required: [start]}]`,
	roots: []string{"Stored"},
	want:  "/** A stored Def. */\nexport interface Stored {\n  name: string;\n  start: string;\n}\n",
}}

func TestMapping(t *testing.T) {
	for _, tc := range mappingCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := declareYAML(t, tc.schemas, tc.keys, tc.roots...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestUntranslatable checks that what has no faithful type fails, naming
// where, instead of becoming any.
func TestUntranslatable(t *testing.T) {
	const ab = `
A: {type: object, required: [type], properties: {type: {const: a}}}
B: {type: object, properties: {type: {const: b}}}
`
	for _, tc := range []struct {
		name, schemas string
		keys          map[string]string
		root, want    string
	}{
		{"anyOf", "T: {type: object, properties: {x: {anyOf: [{type: string}, {type: number}]}}}", nil, "T", "T.x: not supported: anyOf"},
		{"no type", "T: {type: object, properties: {x: {description: what}}}", nil, "T", "T.x: schema has no type"},
		{"object const", "T: {const: {a: 1}}", nil, "T", "no literal type"},
		{"properties and map", "T: {type: object, properties: {x: {type: string}}, additionalProperties: {type: string}}", nil, "T", "T: properties next to an additionalProperties schema"},
		{"missing schema", "T: {type: string}", nil, "U", "components.schemas.U: no such schema"},
		{"stale key name", "T: {type: object, properties: {x: {type: string}}}", map[string]string{"T.y": "column"}, "T", "key name for T.y"},
		{"discriminator not required", ab + "AB: {oneOf: [{$ref: '#/components/schemas/A'}, {$ref: '#/components/schemas/B'}], discriminator: {propertyName: type}}",
			nil, "AB", `#/components/schemas/B does not require discriminator property "type"`},
		{"discriminator mapping", ab + "AB: {oneOf: [{$ref: '#/components/schemas/A'}], discriminator: {propertyName: type, mapping: {b: '#/components/schemas/A'}}}",
			nil, "AB", `discriminator maps "b" to #/components/schemas/A`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := declareYAML(t, tc.schemas, tc.keys, tc.root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q; output:\n%s", err, tc.want, got)
			}
		})
	}
}

func TestJSDoc(t *testing.T) {
	if got, want := jsdoc("ends */ here\n", nil, 1), "  /** ends *\\/ here */\n"; got != want {
		t.Errorf("escape: got %q, want %q", got, want)
	}
	long := strings.Repeat("word ", 40)
	for _, l := range docLines(long) {
		if len(l) > docWidth {
			t.Errorf("line of %d > %d: %q", len(l), docWidth, l)
		}
	}
	table := "| a | " + long + " |"
	if got := docLines(table); len(got) != 1 {
		t.Errorf("a table row was wrapped: %q", got)
	}
	paras := strings.Repeat("line\n", 30) + "\n" + strings.Repeat("more\n", 30)
	got := docLines(paras)
	if len(got) != 32 || got[30] != "" || got[31] != "(Continued in openapi.yaml.)" {
		t.Errorf("cut: got %d lines ending %q", len(got), got[len(got)-2:])
	}
}

// TestTypeScript type-checks the declarations and testdata/narrow.ts, a
// client narrowing Event by type, when a compiler is at hand:
// TSC=path/to/node_modules/.bin/tsc go test ./clients/js/gen
func TestTypeScript(t *testing.T) {
	// The compiler the package's development dependencies install (make
	// test-deps), or the one TSC names.
	tsc := os.Getenv("TSC")
	if tsc == "" {
		tsc = "../node_modules/.bin/tsc"
		if _, err := os.Stat(tsc); err != nil {
			t.Skip("no TypeScript compiler: run make test-deps (npm ci in clients/js), or set TSC")
		}
	}
	out, err := exec.Command(tsc, "--noEmit", "--strict", "--target", "es2022", "../src/events.d.ts", "testdata/narrow.ts").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", tsc, err, out)
	}
	// And the client's hand-written API (index.d.ts, node.d.ts) as an
	// application imports it, through the package's exports map.
	out, err = exec.Command(tsc, "-p", "../test/tsconfig.json").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -p test/tsconfig.json: %v\n%s", tsc, err, out)
	}
}
