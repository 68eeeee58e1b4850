package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/vstream-gateway/vstream-gateway/bridge"
	"github.com/vstream-gateway/vstream-gateway/cursor"
	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/source"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/store/boltstore"
	"github.com/vstream-gateway/vstream-gateway/store/epoch"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// Server is a running gateway.
type Server struct {
	// replica names this process in leases and in GET /v1/stats.
	replica string
	cfg     *Config
	log     *slog.Logger
	store   store.Store
	src     *source.Client
	hub     *hub.Hub
	bridger *bridge.Bridger
	api     *handlers.API
	http    *http.Server

	authn  *Authenticator
	limits *Limiter
	cors   *CORS
	// closing ends when shutdown begins (closeStreams).
	closing      context.Context
	closeStreams context.CancelFunc

	journals *reshard.Registry
	streams  *streams.Registry
	watcher  *reshard.Watcher
	mover    *reshard.Mover  // nil without --vtctld
	vtctld   *reshard.Vtctld // nil without --vtctld
	guard    *epoch.Guard    // nil for the embedded store (storeloss.go)
	// streamsBefore: the stream names cached at the last check that found
	// the store intact (storeloss.go).
	streamsBefore atomic.Pointer[[]string]

	wh webhooks // see webhooks.go
}

// New builds a gateway from cfg: opens the store, dials vtgate, loads the
// streams file. What it opened is closed again when a later step fails.
func New(ctx context.Context, cfg *Config, log *slog.Logger) (*Server, error) {
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, store: st, replica: replicaID()}
	ok := false
	defer func() {
		if !ok {
			s.closeBackends()
		}
	}()
	if err := s.build(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// build makes the gateway's parts on its store, in order: each step uses
// what the steps before it made.
func (s *Server) build(ctx context.Context) error {
	if err := s.openGuard(ctx); err != nil {
		return err
	}
	key, err := cursorKey(ctx, s.cfg, s.store)
	if err != nil {
		return err
	}
	codec, err := cursor.NewCodec(key, refStore{s.store})
	if err != nil {
		return err
	}
	if err := s.newFrontDoor(ctx); err != nil {
		return err
	}
	journals := reshard.NewRegistry(s.store)
	if err := s.dialVtgate(ctx, journals); err != nil {
		return err
	}
	reg, err := s.loadStreams(ctx)
	if err != nil {
		return err
	}
	s.journals, s.streams = journals, reg
	if err := s.newHub(codec); err != nil {
		return err
	}
	s.newWatcher()
	if err := s.newAPI(); err != nil {
		return err
	}
	if err := s.newWebhooks(s.cfg); err != nil {
		return err
	}
	s.recoverySteps(key)
	s.http = s.newHTTPServer(ctx)
	return nil
}

// newFrontDoor makes what every request passes before its handler (the
// authenticator, the rate and connection limits, CORS) and the context
// that ends when shutdown begins.
func (s *Server) newFrontDoor(ctx context.Context) error {
	var err error
	if s.authn, err = newAuthenticator(ctx, s.cfg, s.log); err != nil {
		return err
	}
	s.limits, s.cors = newLimiter(s.cfg), newCORS(s.cfg.CORSOrigins)
	s.closing, s.closeStreams = context.WithCancel(context.Background())
	return nil
}

// dialVtgate connects to vtgate, recording the reshard journals its
// streams carry in journals.
func (s *Server) dialVtgate(ctx context.Context, journals *reshard.Registry) error {
	cfg := s.cfg
	vtOpts, err := vtgateOptions(cfg)
	if err != nil {
		return err
	}
	opts := append([]source.Option{source.WithLogger(s.log), source.WithHeartbeat(cfg.Heartbeat),
		source.WithStallTimeout(cfg.StallTimeout), source.WithPrimaryPoll(cfg.PrimaryPoll),
		source.WithReadAhead(cfg.ReadAhead), source.WithJournalHook(journalRecorder(journals, s)),
		source.WithIncarnations(incarnations(journals, s))}, vtOpts...)
	s.src, err = source.Dial(ctx, cfg.Vtgate, opts...)
	return err
}

// loadStreams makes the stream registry, with the streams file's
// definitions if one is configured.
func (s *Server) loadStreams(ctx context.Context) (*streams.Registry, error) {
	reg := streams.NewRegistry(s.store, &schemaChecker{conn: s.src.Conn()})
	if s.cfg.StreamsFile != "" {
		n, err := reg.LoadFile(ctx, s.cfg.StreamsFile)
		if err != nil {
			return nil, fmt.Errorf("streams file: %w", err)
		}
		s.log.Info("streams loaded", "file", s.cfg.StreamsFile, "count", n)
	}
	return reg, nil
}

// newHub makes the hub and the bridger, and with --vtctld the mover that makes streams
// follow their tables.
func (s *Server) newHub(codec *cursor.Codec) error {
	cfg := s.cfg
	tails := hub.DefaultTailOptions
	tails.RingBytes, tails.RingEntries, tails.Idle = cfg.RingBytes, cfg.RingEntries, cfg.TailIdle
	hubOpts := []hub.Option{hub.WithLogger(s.log), hub.WithTails(tails),
		hub.WithRebuilder(hub.ClusterRebuilder{Src: s.src, Reg: s.journals}, s.observeRebuild),
		hub.WithStoreLoss(s.lostAt, cfg.StoreLossWindow)}
	if cfg.Vtctld != "" {
		var err error
		if s.mover, s.vtctld, err = s.newMover(cfg.Vtctld); err != nil {
			return err
		}
		hubOpts = append(hubOpts, hub.WithMoveWatch(moveWatch{m: s.mover, reg: s.streams}))
	}
	var err error
	if s.hub, err = hub.New(s.src, codec, s.store, hubOpts...); err != nil {
		return err
	}
	s.bridger, err = bridge.New(s.hub.Cursors(), s.store, s.src, bridge.WithLogger(s.log), bridge.WithHolder(s.replica),
		bridge.WithSpoolLimit(cfg.SpoolEvents, cfg.SpoolBytes), bridge.WithTopology(s.src))
	return err
}

// newWatcher makes the journal watcher, which bridges every stream across
// a reshard of its keyspace.
func (s *Server) newWatcher() {
	reg := s.streams
	s.watcher = reshard.NewWatcher(s.src, s.store, s.journals, s.replica, servedKeyspaces(reg),
		func(ctx context.Context, j *reshard.Journal, l store.Lease) {
			defs, err := reg.List(ctx)
			if err != nil {
				s.log.Error("bridging: listing streams failed", "err", err)
				return
			}
			s.bridger.All(ctx, defs, j, &l)
		}, reshard.WithWatcherLogger(s.log), reshard.WithTailRider(s.rideTail, hub.ErrRideEnded))
}

// newAPI makes the HTTP API, each transport configured from the flags.
func (s *Server) newAPI() error {
	cfg := s.cfg
	s.api = &handlers.API{
		Streams:  s.streams,
		Hub:      s.hub,
		Bridges:  s.bridger,
		Journals: s.journals,
		Cursors:  s.hub.Cursors(),
		Store:    s.store,
		Log:      s.log,
		Ready:    s.ready,
		Shutdown: s.closing,
		History:  metrics.NewHistory(statsEvery, statsSpan),
		Replica:  s.replica,
		Topology: s.src.Topology,

		AdminConfig:     cfg.adminConfig(),
		PullConfig:      cfg.pullConfig(),
		SSEConfig:       cfg.sseConfig(),
		WebSocketConfig: cfg.webSocketConfig(),
	}
	if err := s.api.CheckConfig(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if s.authn.verifier != nil {
		s.api.Verify = s.authn.verifier.Verify // a WebSocket's refresh
	}
	return nil
}

// newHTTPServer makes the HTTP server on the router.
func (s *Server) newHTTPServer(ctx context.Context) *http.Server {
	return &http.Server{
		Addr:              s.cfg.Listen,
		Handler:           s.Router(),
		ReadHeaderTimeout: 10 * time.Second,
		// Requests do not inherit ctx: on shutdown, streaming clients must
		// still be able to receive their final cursor (see Serve).
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

func openStore(ctx context.Context, cfg *Config) (store.Store, error) {
	if len(cfg.Redis) > 0 {
		st, err := redisstore.Dial(ctx, cfg.Redis)
		if err != nil {
			return nil, fmt.Errorf("redis store: %w", err)
		}
		return st, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := boltstore.Open(filepath.Join(cfg.DataDir, "vsg.db"))
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	return st, nil
}

// cursorKey returns the configured signing key, or the one all replicas
// share through the store (generated by whichever starts first).
func cursorKey(ctx context.Context, cfg *Config, st store.Store) ([]byte, error) {
	if cfg.CursorSecret != "" {
		return []byte(cfg.CursorSecret), nil
	}
	fresh := make([]byte, 32)
	rand.Read(fresh)
	if _, err := st.PutIfAbsent(ctx, "meta", "cursor-key", fresh); err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	return st.Get(ctx, "meta", "cursor-key")
}

// refStore keeps large cursor positions in the store.
type refStore struct{ st store.Store }

func (r refStore) PutRef(ctx context.Context, id string, data []byte) error {
	return r.st.Put(ctx, "cursor-refs", id, data)
}

func (r refStore) GetRef(ctx context.Context, id string) ([]byte, error) {
	return r.st.Get(ctx, "cursor-refs", id)
}

func (s *Server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if s.guard != nil {
		if err := s.guard.Err(); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	if _, err := s.src.Conn().Session("", nil).Execute(ctx, "select 1 from dual", nil, false); err != nil {
		return fmt.Errorf("vtgate: %w", err)
	}
	return nil
}

// API returns the HTTP API (for tests).
func (s *Server) API() *handlers.API { return s.api }

// The console's charts (GET /v1/stats) show the last 15 minutes, sampled
// every 5 s: 180 points per stream, drawn at once when the page opens.
const (
	statsEvery = 5 * time.Second
	statsSpan  = 15 * time.Minute
)

// Handler returns the root HTTP handler.
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Serve serves on l until ctx ends, then shuts down gracefully: new
// requests are refused, streaming clients are closed with a resumable
// cursor, in-flight pulls finish.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(l) }()
	// The background loops stop before the store closes (closeBackends):
	// the journal watcher and the MoveTables follower give their leases
	// back on the way out, so another replica takes over at once, not
	// after the leases' time to live. Last started, first stopped.
	var stops []func()
	stopLoops := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		stops = nil
	}
	defer stopLoops()
	wctx, stopWatcher := context.WithCancel(ctx)
	watcherDone := make(chan struct{})
	go func() { defer close(watcherDone); s.watcher.Run(wctx) }()
	stops = append(stops, func() { stopWatcher(); <-watcherDone })
	if s.mover != nil {
		moverDone := make(chan struct{})
		go func() { defer close(moverDone); s.mover.Run(wctx) }()
		stops = append(stops, func() { stopWatcher(); <-moverDone })
	}
	gctx, stopGuard := context.WithCancel(ctx)
	waitGuard := s.runGuard(gctx)
	stops = append(stops, func() { stopGuard(); waitGuard() })
	s.startWebhooks(ctx)
	s.startDebug(ctx)
	hctx, stopHistory := context.WithCancel(ctx)
	historyDone := make(chan struct{})
	go func() { defer close(historyDone); s.api.History.Run(hctx) }()
	stops = append(stops, func() { stopHistory(); <-historyDone })
	s.log.Info("gateway listening", "addr", l.Addr().String(), "vtgate", s.cfg.Vtgate, "store", s.storeName())
	select {
	case err := <-errc:
		stopLoops()
		s.closeBackends()
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: closing streaming clients with a resumable cursor")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	err := s.shutdown(sctx)
	// The store closes last: every ack that reached a handler is written
	// by now (acks are stored synchronously), so no cursor is lost.
	stopLoops()
	s.closeBackends()
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown grace expired; closing remaining connections", "grace", s.cfg.ShutdownGrace)
		s.http.Close()
	}
	return nil
}

// ListenAndServe listens on the configured address.
func (s *Server) ListenAndServe(ctx context.Context) error {
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return err
	}
	return s.Serve(ctx, l)
}

func (s *Server) storeName() string {
	if len(s.cfg.Redis) > 0 {
		return "redis"
	}
	return "embedded:" + s.cfg.DataDir
}

func (s *Server) closeBackends() {
	s.stopWebhooks() // releases webhook leases while the store is still open
	if s.bridger != nil {
		s.bridger.Close() // gives MoveTables bridging leases back likewise
	}
	if s.hub != nil {
		s.hub.Close()
	}
	if s.src != nil {
		s.src.Close()
	}
	if s.vtctld != nil {
		s.vtctld.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}
