// Package jsclient holds the JavaScript client's modules (src/*.js),
// embedded so that the gateway's console serves the very client it is
// published as: the console keeps no second copy of the protocol.
package jsclient

import "embed"

// Source holds src/*.js: index.js and the modules it imports.
//
//go:embed src/*.js
var Source embed.FS
