// Package web serves the dashboard: static files embedded in the binary,
// and the JavaScript client its live table reads with.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"sync"

	jsclient "github.com/vstream-gateway/vstream-gateway/clients/js"
)

//go:embed static
var static embed.FS

// ClientPath is where the JavaScript client's modules are served: the
// console imports it relative to the page, so it works behind a prefix.
const ClientPath = "/vendor/vsg-client/"

// Handler serves the dashboard files and, under ClientPath, the client.
func Handler() http.Handler { return handler() }

var handler = sync.OnceValue(func() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	client, err := fs.Sub(jsclient.Source, "src")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle(ClientPath, http.StripPrefix(ClientPath, http.FileServerFS(client)))
	mux.Handle("/", http.FileServerFS(sub))
	return mux
})
