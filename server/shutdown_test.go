package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore"
	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
)

// TestShutdownReleasesTheWatcherLease: a gateway that shuts down gives its
// journal watcher's lease back while its store is still open, so another
// replica takes the watch over at once (a rolling restart), not after the
// lease's time to live.
func TestShutdownReleasesTheWatcherLease(t *testing.T) {
	node := redistest.StartNode(t, redistest.NodeOptions{})
	url := "redis://" + node.Addr() + "/0"
	file := filepath.Join(t.TempDir(), "streams.yaml")
	if err := os.WriteFile(file, []byte("streams:\n  - name: s\n    keyspace: customer\n    tables: [customer]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseFlags([]string{"--insecure-no-auth", "--redis", url, "--streams-file", file, "--vtgate", deadAddr(t)}, env())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _, served := startServing(ctx, t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	wait.For(t, "the watcher holds its lease", 10*time.Second, func() bool {
		return slices.Contains(s.watcher.Watching(), "customer")
	})
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}

	st, err := redisstore.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AcquireLease(context.Background(), "watcher/customer", "next-replica", time.Minute); err != nil {
		t.Fatalf("another replica cannot take the watcher's lease after a clean shutdown: %v", err)
	}
}

// startServing makes a gateway of cfg (New) and serves it on a loopback
// port until ctx ends; served gets what Serve returned.
func startServing(ctx context.Context, t *testing.T, cfg *Config, log *slog.Logger) (s *Server, addr string, served <-chan error) {
	t.Helper()
	s, err := New(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	return s, l.Addr().String(), done
}
