// Command vstream-gateway serves Vitess change streams over WebSocket, SSE
// and HTTP long-poll. `vstream-gateway token …` mints an HS256 token (for
// the demo and scripts).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/vstream-gateway/vstream-gateway/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "token" {
		runToken()
	}
	cfg, err := server.ParseFlags(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vstream-gateway:", err)
		os.Exit(2)
	}
	log := newLogger(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := server.New(ctx, cfg, log)
	if err != nil {
		log.Error("start-up failed", "err", err)
		os.Exit(1)
	}
	if err := s.ListenAndServe(ctx); err != nil {
		log.Error("server failed", "err", err)
		os.Exit(1)
	}
}

func newLogger(cfg *server.Config) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
