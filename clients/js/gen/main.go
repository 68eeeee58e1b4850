// Command gen writes clients/js/src/events.d.ts: the TypeScript declarations
// of the event and body schemas of openapi.yaml, so that the JavaScript
// client's types come from the same contract as the server. Run it from the
// repository root after changing openapi.yaml:
//
//	go run ./clients/js/gen
//
// gen_test.go fails while the committed file differs from what this writes.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/getkin/kin-openapi/openapi3"
)

// header is the first line of the output. It has the form Go tools and
// code review sites recognise as generated code.
const header = "// Code generated from openapi.yaml by `go run ./clients/js/gen`; DO NOT EDIT.\n"

// roots are the components.schemas the client needs. Schemas they refer to
// (such as Rule, through StreamDefinition.rules) are declared too.
var roots = []string{
	"Event", "ChangeEvent", "ReshardEvent", "MovedEvent", "BlockedEvent",
	"ResyncEvent", "SnapshotCompleteEvent", "DDLEvent", "HeartbeatEvent",
	"Disconnect", "SSETokenExpired", "SSEError", "Batch", "Error",
	"AckRequest", "AckResponse", "StreamDefinition", "Stream", "Subscriber",
	"SubscriberStatus", "Cursor", "Name",
}

// keyNames names the key of index signatures where the generic "key" says
// less than the spec's descriptions do. TypeScript ignores the name; readers
// of the declarations do not. Entries are "Schema.property" paths; one that
// matches nothing fails generation, so a renamed property cannot leave it
// behind unnoticed.
var keyNames = map[string]string{
	"ChangeEvent.key":            "column",
	"ChangeEvent.before":         "column",
	"ChangeEvent.after":          "column",
	"SubscriberStatus.positions": "shard",
	"SubscriberStatus.lag":       "shard",
}

func main() {
	spec := flag.String("spec", "openapi.yaml", "the OpenAPI document to read")
	out := flag.String("out", "clients/js/src/events.d.ts", "the declaration file to write")
	flag.Parse()
	if err := run(*spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(specPath, outPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	src, err := generate(data)
	if err != nil {
		return err
	}
	// Leave the file alone when nothing changed, so its mtime only moves
	// with its content.
	if old, err := os.ReadFile(outPath); err == nil && bytes.Equal(old, src) {
		return nil
	}
	return os.WriteFile(outPath, src, 0o644)
}

// generate returns the declaration file for the OpenAPI document data.
func generate(data []byte) ([]byte, error) {
	doc, err := load(data)
	if err != nil {
		return nil, err
	}
	body, err := declare(doc.Components.Schemas, roots, keyNames)
	if err != nil {
		return nil, err
	}
	return []byte(header + "\n" + body), nil
}

// load parses and validates an OpenAPI document, as the server's tests do:
// a document they would reject must not yield types either.
func load(data []byte) (*openapi3.T, error) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	loader.Context = ctx
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	if doc.Components == nil {
		return nil, fmt.Errorf("openapi.yaml has no components")
	}
	return doc, nil
}
