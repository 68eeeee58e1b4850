package server

import (
	"net/http"

	vsg "github.com/vstream-gateway/vstream-gateway"
)

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(vsg.OpenAPI)
}
