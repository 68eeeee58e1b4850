// Package server wires the gateway together: configuration, the HTTP
// router and its middleware, and the process lifecycle.
package server

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vstream-gateway/vstream-gateway/bridge"
	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
)

// Config is the gateway configuration. Every flag can also be given as a
// VSG_* environment variable (--data-dir → VSG_DATA_DIR) or as a key of
// the YAML file named by --config (data-dir: ./data). Precedence: command
// line, then environment, then the file, then the default.
type Config struct {
	ConfigFile    string
	Listen        string
	DebugListen   string
	Vtgate        string
	Vtctld        string
	Redis         []string
	DataDir       string
	StreamsFile   string
	CursorSecret  string
	LogLevel      string
	LogFormat     string
	ShutdownGrace time.Duration
	Heartbeat     time.Duration
	StallTimeout  time.Duration
	// PrimaryPoll: see source.WithPrimaryPoll.
	PrimaryPoll time.Duration
	// StoreLossWindow: see hub.WithStoreLoss.
	StoreLossWindow time.Duration

	// Authentication (see package auth).
	JWTSecrets     []string
	JWKSURL        string
	JWKSRefresh    time.Duration
	JWTAudience    string
	JWTIssuer      string
	JWTLeeway      time.Duration
	JWTCacheSize   int
	JWTCacheTTL    time.Duration
	InsecureNoAuth bool
	MetricsAuth    bool
	CORSOrigins    []string

	// Limits.
	MaxBodyBytes     int64
	WSReadLimit      int64
	WSQueue          int
	WSQueueBytes     int
	ReadAhead        int
	RingBytes        int
	RingEntries      int
	TailIdle         time.Duration
	SpoolEvents      int
	SpoolBytes       int
	WSSlowAfter      time.Duration
	MaxLimit         int
	DefaultLimit     int
	MaxWait          time.Duration
	PullCache        bool
	PullCacheMaxAge  time.Duration
	PullLiveMaxAge   time.Duration
	PullLiveLinger   time.Duration
	MaxConnsPerToken int
	AdminRate        float64
	AdminBurst       int

	// vtgate connection security.
	VtgateCA         string
	VtgateCert       string
	VtgateKey        string
	VtgateServerName string
	VtgateUser       string
	VtgatePassword   string

	// Webhooks.
	AllowPrivateWebhooks bool
	WebhookLeaseTTL      time.Duration
	WebhookRetryMin      time.Duration
	WebhookRetryMax      time.Duration
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("configuration")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// ParseFlags reads the configuration from args, the environment and the
// optional config file.
//
// github.com/peterbourgon/ff/v3 (v3.4.0) would do the same job but changes
// what operators rely on, so config_flags.go stays:
//   - its env split (WithEnvVarSplit) applies to every flag, not just
//     lists: VSG_CURSOR_SECRET=abcdefgh,ijklmnopqrst silently becomes
//     "ijklmnopqrst"; without it VSG_JWT_SECRET=a,b is one secret. Nor are
//     parts trimmed or empty ones dropped ("a, b,,c" gives " b" and "").
//   - its YAML parser calls Set once per list element for any flag, so
//     listen: [":1", ":2"] quietly means ":2" instead of being refused.
//   - it decodes with yaml.v2 (YAML 1.1): insecure-no-auth: yes turns
//     authentication off where today it is an error; "listen:" with no
//     value sets "" instead of being refused.
//   - a config key in the file is ignored rather than refused.
//   - it reads os.Getenv only, so ParseFlags could no longer take getenv.
func ParseFlags(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("vstream-gateway", flag.ContinueOnError)
	d := &definer{fs: fs, getenv: getenv}
	c.defineCore(d)
	c.defineAuth(d)
	c.defineLimits(d)
	c.defineVtgateAuth(d)
	c.defineWebhooks(d)

	if err := d.loadFile(args); err != nil {
		return nil, err
	}
	d.commandLine()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// defineCore defines the flags of the gateway itself: where it listens,
// what it reads, where it keeps state, its logs and the upstream's timings.
func (c *Config) defineCore(d *definer) {
	d.str(&c.ConfigFile, "config", "", "optional YAML file whose keys are these flag names")
	d.str(&c.Listen, "listen", ":8080", "HTTP listen address")
	d.str(&c.DebugListen, "debug-listen", "", "address for Go's /debug/pprof profiles (off when empty; keep it on loopback)")
	d.str(&c.Vtgate, "vtgate", "localhost:15991", "vtgate gRPC address")
	d.str(&c.Vtctld, "vtctld", "", "vtctld gRPC address: streams follow their tables when MoveTables moves them to another keyspace (off when empty)")
	d.urls(&c.Redis, "redis", "Redis: redis://host:port/db, redis+cluster://h1:p1,h2:p2, redis+sentinel://h1:p1,h2:p2/master (rediss… for TLS); repeat for the seed nodes of a Cluster; empty uses the embedded store")
	d.str(&c.DataDir, "data-dir", "./data", "directory of the embedded store (when --redis is empty)")
	d.str(&c.StreamsFile, "streams-file", "", "optional YAML file of stream definitions loaded at start-up")
	d.str(&c.CursorSecret, "cursor-secret", "", "key that signs cursor tokens (at least 16 bytes); empty: generated once and kept in the store")
	d.str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	d.str(&c.LogFormat, "log-format", "text", "text or json")
	d.dur(&c.ShutdownGrace, "shutdown-grace", 10*time.Second, "how long shutdown waits for clients to be closed")
	d.dur(&c.Heartbeat, "heartbeat", time.Second, "vtgate heartbeat interval on idle streams (whole seconds)")
	d.dur(&c.StallTimeout, "stall-timeout", source.DefaultStallTimeout, "a VStream on which vtgate sends nothing, not even a heartbeat, for this long is cancelled and reopened from its last transaction (a network dropping packets, a hung vtgate); at least 3 heartbeat intervals; 0: never")
	d.dur(&c.PrimaryPoll, "primary-poll", source.DefaultPrimaryPoll, "how often the gateway asks vtgate for the primaries of the shards it streams (SHOW VITESS_TABLETS); a shard whose primary changed has its VStreams reopened from their last transaction; 0: never")
	d.dur(&c.StoreLossWindow, "store-loss-window", hub.DefaultLossWindow, "after the store lost data, how long a named subscriber without a stored cursor gets a resync (reason store_lost) and a fresh snapshot instead of starting at the stream's start")
}

// defineAuth defines the flags of authentication and what a browser may call.
func (c *Config) defineAuth(d *definer) {
	d.list(&c.JWTSecrets, "jwt-secret", "HS256 secret (at least 32 bytes); repeat to rotate (env: comma-separated)")
	d.str(&c.JWKSURL, "jwks-url", "", "JWKS URL for RS/PS/ES/EdDSA tokens (keys by kid, cached and refreshed)")
	d.dur(&c.JWKSRefresh, "jwks-refresh", time.Hour, "how often the JWKS is fetched again (an unknown kid fetches early, at most every 30s)")
	d.str(&c.JWTAudience, "jwt-audience", "", "required aud claim (unchecked when empty)")
	d.str(&c.JWTIssuer, "jwt-issuer", "", "required iss claim (unchecked when empty)")
	d.dur(&c.JWTLeeway, "jwt-leeway", 30*time.Second, "clock skew tolerated on exp, nbf and iat")
	d.integer(&c.JWTCacheSize, "jwt-cache-size", 4096, "verified tokens remembered (a repeated token skips the signature check); 0: none")
	d.dur(&c.JWTCacheTTL, "jwt-cache-ttl", time.Minute, "longest a verified token is remembered (never past its exp; a JWKS key's withdrawal still applies at once)")
	d.boolean(&c.InsecureNoAuth, "insecure-no-auth", false, "serve without authentication (local demo only)")
	d.boolean(&c.MetricsAuth, "metrics-auth", false, "require a token with the admin or metrics scope for /metrics")
	d.list(&c.CORSOrigins, "cors-origins", "origins allowed to call the API from a browser and open WebSockets (comma-separated or repeated; * for any)")
}

// defineLimits defines the flags of what each transport and reader may
// hold or ask, and of the pull cache.
func (c *Config) defineLimits(d *definer) {
	admin, pull, ws := handlers.DefaultAdminConfig(), handlers.DefaultPullConfig(), handlers.DefaultWebSocketConfig()
	d.int64(&c.MaxBodyBytes, "max-body-bytes", admin.MaxBodyBytes, "largest request body")
	d.int64(&c.WSReadLimit, "ws-read-limit", ws.ReadLimit, "largest WebSocket message a client may send")
	d.integer(&c.WSQueue, "ws-queue", ws.Queue, "transactions (and heartbeats) queued per WebSocket")
	d.integer(&c.WSQueueBytes, "ws-queue-bytes", ws.QueueBytes, "bytes of events queued per WebSocket (a queue is full at either bound)")
	d.integer(&c.ReadAhead, "read-ahead", 4<<20, "bytes of events each VStream reader buffers ahead of its client; past it vtgate is paused")
	d.integer(&c.RingBytes, "ring-bytes", hub.DefaultTailOptions.RingBytes, "bytes of recent transactions each stream's tail keeps in memory: readers whose cursor is inside are served without a VStream of their own")
	d.integer(&c.RingEntries, "ring-entries", hub.DefaultTailOptions.RingEntries, "transactions each stream's tail keeps (the ring is full at either bound); 0: no shared tail, every reader gets a VStream of its own")
	d.dur(&c.TailIdle, "tail-idle", hub.DefaultTailOptions.Idle, "how long a stream's tail runs on without readers (for pollers and reconnecting clients)")
	d.integer(&c.SpoolEvents, "bridge-spool-events", bridge.DefaultSpoolEvents, "events one reshard bridge may spool for a subscriber behind the cutover; past it the bridge fails (GET /v1/reshards) and the subscriber pins the old shards until it reads across the cutover itself")
	d.integer(&c.SpoolBytes, "bridge-spool-bytes", bridge.DefaultSpoolBytes, "bytes one reshard bridge may spool (a spool is full at either bound)")
	d.dur(&c.WSSlowAfter, "ws-slow-after", ws.SlowAfter, "how long a WebSocket's full queue may stay full, or one write to it stay blocked, before the client is closed as a slow consumer (4008)")
	d.integer(&c.MaxLimit, "max-limit", pull.MaxLimit, "cap on the pull limit parameter (events per batch)")
	d.integer(&c.DefaultLimit, "default-limit", pull.DefaultLimit, "pull batch size when limit is absent")
	d.dur(&c.MaxWait, "max-wait", pull.MaxWait, "cap on the pull wait parameter (long-poll)")
	d.boolean(&c.PullCache, "pull-cache", pull.Cache, "pull pages say when a shared cache (a CDN, a caching proxy) may keep them: whole pages and live pages addressed with the token's scope hash are public (a cache does not check tokens: see README)")
	d.dur(&c.PullCacheMaxAge, "pull-cache-max-age", pull.CacheMaxAge, "max-age of a whole pull page (from a cursor, not at the live end) with --pull-cache")
	d.dur(&c.PullLiveMaxAge, "pull-live-max-age", pull.LiveMaxAge, "max-age of a pull page at the live end with --pull-cache (keep it below the clients' wait)")
	d.dur(&c.PullLiveLinger, "pull-live-linger", pull.LiveLinger, "how long a long-poll at the live end waits, once a transaction came, for more before answering: pages of a busy stream come at most this often per cursor (what a cache passes on); 0: at once")
	d.integer(&c.MaxConnsPerToken, "max-conns-per-token", 32, "concurrent streaming connections (pull, SSE, WebSocket) per token subject; 0: unlimited")
	d.float(&c.AdminRate, "admin-rate", 5, "admin API requests per second per token subject")
	d.integer(&c.AdminBurst, "admin-burst", 20, "admin API burst per token subject")
}

// defineVtgateAuth defines the flags of how the gateway authenticates to vtgate.
func (c *Config) defineVtgateAuth(d *definer) {
	d.str(&c.VtgateCA, "vtgate-ca", "", "CA file that verifies vtgate's certificate (enables TLS)")
	d.str(&c.VtgateCert, "vtgate-cert", "", "client certificate file for vtgate (mutual TLS)")
	d.str(&c.VtgateKey, "vtgate-key", "", "client key file for vtgate (mutual TLS)")
	d.str(&c.VtgateServerName, "vtgate-server-name", "", "server name expected in vtgate's certificate")
	d.str(&c.VtgateUser, "vtgate-user", "", "username for vtgate's static gRPC auth (sent per RPC)")
	d.str(&c.VtgatePassword, "vtgate-password", "", "password for vtgate's static gRPC auth")
}

// defineWebhooks defines the flags of webhook delivery.
func (c *Config) defineWebhooks(d *definer) {
	d.boolean(&c.AllowPrivateWebhooks, "allow-private-webhooks", false, "let webhooks reach loopback, private and link-local addresses (development and tests only: otherwise refused against SSRF)")
	d.dur(&c.WebhookLeaseTTL, "webhook-lease-ttl", 15*time.Second, "how long a replica owns a webhook without renewing its lease: the longest a webhook pauses when its replica dies")
	d.dur(&c.WebhookRetryMin, "webhook-retry-min", time.Second, "first webhook retry delay (then doubling, ±50% jitter)")
	d.dur(&c.WebhookRetryMax, "webhook-retry-max", 10*time.Minute, "longest webhook retry delay")
}

// validate refuses a configuration the gateway cannot run with, naming
// the flags at fault. The steps run in this order, and the first error
// found is the one reported.
func (c *Config) validate() error {
	for _, step := range []func() error{
		c.validateUpstream,
		c.validateWebhooks,
		c.validateStore,
		c.validateAuth,
		c.validateVtgateTLS,
		c.validateLimits,
		c.validateCORS,
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// validateUpstream checks the cursor secret and how vtgate is watched: the
// stall timeout against the heartbeat, the primary poll, the store-loss
// window.
func (c *Config) validateUpstream() error {
	switch {
	case c.CursorSecret != "" && len(c.CursorSecret) < 16:
		return configErr("--cursor-secret must be at least 16 bytes")
	case c.StallTimeout < 0:
		return configErr("--stall-timeout must not be negative")
	case c.StallTimeout > 0 && c.Heartbeat < time.Second:
		return configErr("--stall-timeout needs vtgate heartbeats: --heartbeat of at least 1s (or --stall-timeout 0)")
	case c.StallTimeout > 0 && c.StallTimeout < 3*c.Heartbeat.Truncate(time.Second):
		return configErr("--stall-timeout must be at least 3 heartbeat intervals (--heartbeat %v): a heartbeat delayed by a busy vtgate is not a stall", c.Heartbeat)
	case c.PrimaryPoll < 0:
		return configErr("--primary-poll must not be negative")
	case c.PrimaryPoll > 0 && c.PrimaryPoll < 100*time.Millisecond:
		return configErr("--primary-poll must be at least 100ms (each poll is a query to vtgate)")
	case c.StoreLossWindow < 0:
		return configErr("--store-loss-window must not be negative")
	}
	return nil
}

// validateWebhooks checks the webhook lease and retry delays.
func (c *Config) validateWebhooks() error {
	switch {
	case c.WebhookLeaseTTL < time.Second:
		return configErr("--webhook-lease-ttl must be at least 1s")
	case c.WebhookRetryMin <= 0 || c.WebhookRetryMax < c.WebhookRetryMin:
		return configErr("--webhook-retry-min must be positive and --webhook-retry-max at least as long")
	}
	return nil
}

// validateStore checks the Redis URLs, if any.
func (c *Config) validateStore() error {
	if len(c.Redis) > 0 {
		if err := redisstore.CheckURLs(c.Redis); err != nil {
			return configErr("--redis: %v", err)
		}
	}
	return nil
}

// validateAuth checks that authentication is configured, or explicitly
// off, and that what configures it is usable.
func (c *Config) validateAuth() error {
	authConfigured := len(c.JWTSecrets) > 0 || c.JWKSURL != ""
	switch {
	case !authConfigured && !c.InsecureNoAuth:
		return configErr("no authentication configured: give --jwt-secret and/or --jwks-url (or --insecure-no-auth for a local demo)")
	case authConfigured && c.InsecureNoAuth:
		return configErr("--insecure-no-auth cannot be combined with --jwt-secret or --jwks-url")
	}
	for i, s := range c.JWTSecrets {
		if len(s) < 32 {
			return configErr("--jwt-secret %d is %d bytes; HS256 secrets must be at least 32 bytes", i+1, len(s))
		}
	}
	if c.JWKSURL != "" && !strings.HasPrefix(c.JWKSURL, "https://") && !strings.HasPrefix(c.JWKSURL, "http://") {
		return configErr("--jwks-url must be an http(s) URL")
	}
	return nil
}

// validateVtgateTLS checks that vtgate's client credentials come in pairs.
func (c *Config) validateVtgateTLS() error {
	switch {
	case (c.VtgateCert == "") != (c.VtgateKey == ""):
		return configErr("--vtgate-cert and --vtgate-key go together")
	case c.VtgatePassword != "" && c.VtgateUser == "":
		return configErr("--vtgate-password needs --vtgate-user")
	}
	return nil
}

// validateLimits checks the limits on requests, queues, buffers and
// rates.
func (c *Config) validateLimits() error {
	switch {
	case c.MaxBodyBytes < 1024:
		return configErr("--max-body-bytes must be at least 1024")
	case c.WSReadLimit < 1024:
		return configErr("--ws-read-limit must be at least 1024 (an ack carries a cursor of up to 1 KiB)")
	case c.WSQueue < 1 || c.WSQueueBytes < 1:
		return configErr("--ws-queue and --ws-queue-bytes must be positive")
	case c.ReadAhead < 1:
		return configErr("--read-ahead must be positive")
	case c.RingBytes < 1 || c.RingEntries < 0 || c.TailIdle < 0:
		return configErr("--ring-bytes must be positive, --ring-entries and --tail-idle not negative")
	case c.SpoolEvents < 1 || c.SpoolBytes < 1:
		return configErr("--bridge-spool-events and --bridge-spool-bytes must be positive")
	case c.JWTCacheSize < 0 || c.JWTCacheTTL < 0:
		return configErr("--jwt-cache-size and --jwt-cache-ttl must not be negative")
	case c.MaxLimit < 1 || c.DefaultLimit < 1 || c.DefaultLimit > c.MaxLimit:
		return configErr("--default-limit and --max-limit must be positive, default ≤ max")
	case c.MaxWait < 0:
		return configErr("--max-wait must not be negative")
	case c.PullLiveLinger < 0 || c.PullLiveLinger > time.Minute:
		return configErr("--pull-live-linger must be within [0, 1m]")
	case c.PullCache && (c.PullCacheMaxAge < time.Second || c.PullLiveMaxAge < time.Second):
		return configErr("--pull-cache-max-age and --pull-live-max-age must be at least 1s")
	case c.MaxConnsPerToken < 0:
		return configErr("--max-conns-per-token must not be negative")
	case c.AdminRate <= 0 || c.AdminBurst < 1:
		return configErr("--admin-rate and --admin-burst must be positive")
	}
	return nil
}

// validateCORS checks that every allowed origin is * or an http(s) origin.
func (c *Config) validateCORS() error {
	for _, o := range c.CORSOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return configErr("--cors-origins: %q is not * or an http(s) origin", o)
		}
	}
	return nil
}

func envName(flagName string) string {
	return "VSG_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Getenv is os.Getenv, for ParseFlags.
var Getenv = os.Getenv
