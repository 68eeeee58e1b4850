// Package server wires the gateway together: configuration, the HTTP
// router and its middleware, and the process lifecycle.
package server

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// Config is the gateway configuration. Every flag can also be given as a
// VSG_* environment variable (--data-dir → VSG_DATA_DIR); a flag on the
// command line wins over the environment.
type Config struct {
	Listen        string
	Vtgate        string
	Redis         string
	DataDir       string
	StreamsFile   string
	CursorSecret  string
	LogLevel      string
	LogFormat     string
	ShutdownGrace time.Duration
	Heartbeat     time.Duration
}

// ParseFlags reads the configuration from args and the environment.
func ParseFlags(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("vstream-gateway", flag.ContinueOnError)
	str := func(p *string, name, def, usage string) {
		if v := getenv(envName(name)); v != "" {
			def = v
		}
		fs.StringVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		if v := getenv(envName(name)); v != "" {
			if d, err := time.ParseDuration(v); err == nil {
				def = d
			}
		}
		fs.DurationVar(p, name, def, usage+" (env "+envName(name)+")")
	}
	str(&c.Listen, "listen", ":8080", "HTTP listen address")
	str(&c.Vtgate, "vtgate", "localhost:15991", "vtgate gRPC address")
	str(&c.Redis, "redis", "", "Redis URL (redis://host:port/db); empty uses the embedded store")
	str(&c.DataDir, "data-dir", "./data", "directory of the embedded store (when --redis is empty)")
	str(&c.StreamsFile, "streams-file", "", "optional YAML file of stream definitions loaded at start-up")
	str(&c.CursorSecret, "cursor-secret", "", "key that signs cursor tokens (at least 16 bytes); empty: generated once and kept in the store")
	str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	str(&c.LogFormat, "log-format", "text", "text or json")
	dur(&c.ShutdownGrace, "shutdown-grace", 10*time.Second, "how long shutdown waits for clients to be closed")
	dur(&c.Heartbeat, "heartbeat", time.Second, "vtgate heartbeat interval on idle streams (whole seconds)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.CursorSecret != "" && len(c.CursorSecret) < 16 {
		return nil, fmt.Errorf("--cursor-secret must be at least 16 bytes")
	}
	if c.Redis != "" && !strings.HasPrefix(c.Redis, "redis://") && !strings.HasPrefix(c.Redis, "rediss://") {
		return nil, fmt.Errorf("--redis must be a redis:// or rediss:// URL")
	}
	return c, nil
}

func envName(flagName string) string {
	return "VSG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Getenv is os.Getenv, for ParseFlags.
var Getenv = os.Getenv
