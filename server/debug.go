package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"
)

// startDebug serves Go's profiles on a separate listener (--debug-listen)
// so they are never exposed on the public port.
func (s *Server) startDebug(ctx context.Context) {
	if s.cfg.DebugListen == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: s.cfg.DebugListen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			s.log.Warn("debug listener failed", "addr", s.cfg.DebugListen, "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	s.log.Info("profiles served", "addr", s.cfg.DebugListen)
}
