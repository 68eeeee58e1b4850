// Package vsg holds files that ship inside the binary from the repository
// root.
package vsg

import _ "embed"

// OpenAPI is openapi.yaml, the public HTTP API contract.
//
//go:embed openapi.yaml
var OpenAPI []byte
