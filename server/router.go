package server

import (
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/web"
)

// Router builds the HTTP routes.
func (s *Server) Router() http.Handler {
	a := s.api
	r := chi.NewRouter()
	lim := s.limiter()
	admin := chi.Chain(requireAdmin, lim.adminRateLimit) // see middleware.go
	r.Use(recoverer(s.log), accessLog(s.log), instrument, s.corsPolicy().middleware, s.authenticator().middleware)
	r.Get("/healthz", a.Healthz)
	r.Get("/readyz", a.Readyz)
	r.Get("/openapi.yaml", serveOpenAPI)
	r.Get("/metrics", metrics.Handler().ServeHTTP)
	// Operators' view of reshards: lists subscribers of every stream.
	r.With(requireAdmin).Get("/v1/reshards", a.Reshards)
	r.With(admin...).Delete("/v1/reshards/gaps/{keyspace}/{id}", a.DismissGap)
	// The console's numbers: streams the token may read, this replica's view.
	r.Get("/v1/stats", a.Stats)
	r.Route("/v1/streams", func(r chi.Router) {
		r.With(admin...).Post("/", a.CreateStream)
		r.Get("/", a.ListStreams)
		r.Route("/{stream}", func(r chi.Router) {
			r.Use(streamScope)
			r.Get("/", a.GetStream)
			r.With(admin...).Delete("/", a.DeleteStream)
			r.With(readScope, lim.streaming("pull")).Get("/changes", a.Changes)
			r.With(readScope, lim.streaming("sse")).Get("/sse", a.SSE)
			r.With(readScope, lim.streaming("ws")).Get("/ws", a.WS)
			r.With(requireAdmin).Get("/subscribers", a.ListSubscribers)
			r.With(ownSubscriber).Get("/subscribers/{subscriber}", a.GetSubscriber)
			r.With(admin...).Delete("/subscribers/{subscriber}", a.DeleteSubscriber)
			r.With(ownSubscriber).Post("/subscribers/{subscriber}/ack", a.Ack)
			r.With(admin...).Route("/webhooks", s.webhookRoutes)
		})
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.Path) >= 4 && r.URL.Path[:4] == "/v1/" {
			handlers.WriteError(w, s.log, &handlers.Error{Status: 404, Code: "not_found", Message: "no such endpoint"})
			return
		}
		web.Handler().ServeHTTP(w, r)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		handlers.WriteError(w, s.log, &handlers.Error{Status: 405, Code: "method_not_allowed", Message: r.Method + " is not allowed here"})
	})
	return r
}

// recoverer turns a handler panic into a JSON 500 and a logged stack, so one
// bad request never takes the process down.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.Error("panic serving request", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
					handlers.WriteError(w, nil, &handlers.Error{Status: 500, Code: "internal", Message: "internal error"})
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessLog logs each request at debug level (errors at info). Only the
// path is logged: query strings may carry access tokens.
func accessLog(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r)
			level := slog.LevelDebug
			if sw.status >= 400 {
				level = slog.LevelInfo
			}
			log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "duration", time.Since(start))
		})
	}
}
