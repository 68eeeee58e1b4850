package server

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// instrument records each request in vsg_http_requests_total and the
// duration histogram, labelled by chi's route pattern (bounded), or
// "unmatched" for requests no route served (static files, 404s).
func instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" && p != "/*" {
				route = p
			}
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		metrics.HTTPRequest(route, r.Method, status, time.Since(start).Seconds())
	})
}
