package vtlocal

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The end-to-end test runs its own cluster (separate data root, ports
// shifted by testPortOffset) because it reshards customer, and other
// packages' end-to-end tests run in parallel against the shared cluster.
const (
	testDataRoot   = "/var/tmp/vsg-vtdataroot-vtlocaltest"
	testPortOffset = 10000
)

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestClusterReshard brings a cluster up from nothing, checks that Up is
// idempotent and quick, writes through vtgate, reshards customer 0 →
// -80,80- and checks the data and the sequence survive; then stops and
// restarts a tablet and vtgate. Set VSG_E2E=1 to run it (needs root or the
// packages installed, and about a minute).
func TestClusterReshard(t *testing.T) {
	if os.Getenv("VSG_E2E") != "1" {
		t.Skip("set VSG_E2E=1 to run against a real local Vitess cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := New(WithDataRoot(testDataRoot), WithPortOffset(testPortOffset),
		WithLogger(slog.New(slog.NewTextHandler(testLogWriter{t}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsurePackages(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBinaries(ctx); err != nil {
		t.Fatal(err)
	}
	// Start from nothing: a failed earlier run may have left its cluster.
	if err := c.Down(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("VSG_VTLOCAL_KEEP") == "1" {
			t.Logf("keeping the test cluster in %s (VSG_VTLOCAL_KEEP=1)", testDataRoot)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Down(ctx); err != nil {
			t.Errorf("down: %v", err)
		}
	})

	step := func(name string, f func() error) time.Duration {
		t.Helper()
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d := time.Since(start)
		t.Logf("TIMING %-28s %6.2fs", name, d.Seconds())
		return d
	}
	step("up from nothing", func() error { return c.Up(ctx) })
	if d := step("up again (idempotent)", func() error { return c.Up(ctx) }); d > 10*time.Second {
		t.Errorf("second Up took %s; it should only check", d)
	}

	db, err := c.OpenDB("customer")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 20
	for i := 0; i < n; i++ {
		if _, err := db.ExecContext(ctx, "insert into customer(email) values (?)", fmt.Sprintf("user%d@example.com", i)); err != nil {
			t.Fatalf("insert through vtgate: %v", err)
		}
	}
	if got := count(t, ctx, db); got != n {
		t.Fatalf("count before reshard = %d, want %d", got, n)
	}
	maxBefore := maxID(t, ctx, db)

	step("add shards -80,80-", func() error { return c.AddShards(ctx, "customer", []string{"-80", "80-"}) })
	step("reshard create + copy", func() error { return c.Reshard(ctx, "customer", "cust2cust", "0", "-80,80-") })
	step("switch traffic", func() error { return c.SwitchTraffic(ctx, "customer", "cust2cust") })
	step("complete", func() error { return c.Complete(ctx, "customer", "cust2cust") })

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status after reshard:\n%s", st)
	if got := shardNames(st, "customer"); !slices.Equal(got, []string{"-80", "80-"}) {
		t.Fatalf("customer shards after complete = %v, want [-80 80-]", got)
	}
	for _, p := range st.Processes {
		if p.Name == "vttablet-200" || p.Name == "mysqld-200" {
			t.Errorf("old shard's %s still recorded after complete", p.Name)
		}
	}
	if got := count(t, ctx, db); got != n {
		t.Fatalf("count after reshard = %d, want %d", got, n)
	}
	perShard := 0
	for _, sh := range []string{"-80", "80-"} {
		k := countOnShard(t, ctx, db, sh)
		if k == 0 {
			t.Errorf("shard %s holds no rows; the %d rows should be spread by xxhash", sh, n)
		}
		perShard += k
	}
	if perShard != n {
		t.Errorf("rows per shard add up to %d, want %d", perShard, n)
	}
	if _, err := db.ExecContext(ctx, "insert into customer(email) values ('after-reshard@example.com')"); err != nil {
		t.Fatalf("insert after reshard: %v", err)
	}
	if got := count(t, ctx, db); got != n+1 {
		t.Fatalf("count after new insert = %d, want %d", got, n+1)
	}
	if m := maxID(t, ctx, db); m <= maxBefore {
		t.Errorf("new row id %d not above the pre-reshard maximum %d: sequence broken", m, maxBefore)
	}

	// A stopped tablet comes back as a serving primary; vtgate restarts.
	step("stop tablet 300", func() error { return c.StopTablet(ctx, 300) })
	step("start tablet 300", func() error { return c.StartTablet(ctx, 300) })
	step("restart vtgate", func() error { return c.RestartVtgate(ctx) })
	if got := count(t, ctx, db); got != n+1 {
		t.Fatalf("count after tablet and vtgate restart = %d, want %d", got, n+1)
	}
	step("up on a resharded cluster", func() error { return c.Up(ctx) })
	st, err = c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := shardNames(st, "customer"); !slices.Equal(got, []string{"-80", "80-"}) {
		t.Fatalf("customer shards after Up on the resharded cluster = %v, want [-80 80-]", got)
	}
}

func count(t *testing.T, ctx context.Context, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, "select count(*) from customer").Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func maxID(t *testing.T, ctx context.Context, db *sql.DB) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(ctx, "select max(customer_id) from customer").Scan(&n); err != nil {
		t.Fatalf("max id: %v", err)
	}
	return n
}

// countOnShard counts through vtgate with the session targeted at one shard
// ("use `customer:-80`"), which needs a dedicated connection.
func countOnShard(t *testing.T, ctx context.Context, db *sql.DB, shard string) int {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "use `customer:"+shard+"`"); err != nil {
		t.Fatalf("target shard %s: %v", shard, err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "select count(*) from customer").Scan(&n); err != nil {
		t.Fatalf("count on %s: %v", shard, err)
	}
	// Put the pooled connection back untargeted.
	_, _ = conn.ExecContext(ctx, "use `customer`")
	return n
}

func shardNames(st *Status, keyspace string) []string {
	var names []string
	for _, k := range st.Keyspaces {
		if k.Name == keyspace {
			for _, s := range k.Shards {
				names = append(names, s.Name)
			}
		}
	}
	return names
}
