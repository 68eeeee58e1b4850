package vtlocal

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Small MariaDB settings: the distribution defaults (128M buffer pool,
// performance_schema) cost ~400 MiB per mysqld; this keeps each near 70 MiB.
// mysqlctl adds the Vitess settings for MariaDB itself (binlog_format=ROW,
// log_slave_updates, gtid_strict_mode) from its embedded mariadb10.cnf.
const extraMyCnf = `# Local development sizes (vtlocal).
[mysqld]
innodb_buffer_pool_size = 24M
innodb_log_buffer_size = 4M
performance_schema = OFF
key_buffer_size = 1M
max_connections = 200
character_set_server = utf8mb4
collation_server = utf8mb4_general_ci
`

func (c *Cluster) myCnfPath() string  { return filepath.Join(c.dataRoot, "config", "extra.cnf") }
func (c *Cluster) initDBPath() string { return filepath.Join(c.dataRoot, "config", "init_db.sql") }

// writeConfig writes the MariaDB config and the init SQL into the data root.
// The init SQL is Vitess's own config/init_db.sql minus the super_read_only
// statements: MariaDB has no such variable and `mysqlctl init` fails on it
// (errno 1193).
func (c *Cluster) writeConfig(ctx context.Context) error {
	if err := c.mkdirOwned(filepath.Join(c.dataRoot, "config")); err != nil {
		return err
	}
	if err := c.writeOwned(c.myCnfPath(), []byte(extraMyCnf)); err != nil {
		return err
	}
	m, err := c.vitess(ctx)
	if err != nil {
		return err
	}
	stock, err := os.ReadFile(filepath.Join(m.Dir, "config", "init_db.sql"))
	if err != nil {
		return err
	}
	var out []string
	for _, line := range strings.Split(string(stock), "\n") {
		if strings.Contains(line, "super_read_only") && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		out = append(out, line)
	}
	return c.writeOwned(c.initDBPath(), []byte(strings.Join(out, "\n")))
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// waitHTTP waits for url to answer 200. alive is checked on every round so
// that a daemon which crashed at startup fails fast, with its log tail.
func (c *Cluster) waitHTTP(ctx context.Context, what, url string, alive func() error, logPath string) error {
	err := c.poll(ctx, c.timeout, what+" at "+url, func() (bool, error) {
		if err := alive(); err != nil {
			return false, fatal(err)
		}
		code, _, err := httpGet(ctx, url)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK, fmt.Errorf("HTTP %d", code)
	})
	if err != nil {
		return fmt.Errorf("%s: %w\n--- %s ---\n%s", what, err, logPath, fileTail(logPath, 30))
	}
	return nil
}

// daemon is one of the singleton processes; its name is the pid/log file
// base name and the binary's name.
type daemon struct{ name string }

var (
	etcdD   = daemon{name: "etcd"}
	vtctldD = daemon{name: "vtctld"}
	vtgateD = daemon{name: "vtgate"}
)

func (c *Cluster) daemonPorts(d daemon) []int {
	var ports []int
	switch d {
	case etcdD:
		ports = []int{EtcdClientPort, EtcdPeerPort}
	case vtctldD:
		ports = []int{VtctldWebPort, VtctldGRPCPort}
	case vtgateD:
		ports = []int{VtgateWebPort, VtgateGRPCPort, VtgateMySQLPort}
	}
	for i := range ports {
		ports[i] = c.port(ports[i])
	}
	return ports
}

func (c *Cluster) daemonPid(d daemon) int {
	pid := readPid(c.pidFile(d.name))
	if pidAlive(pid, d.name) {
		return pid
	}
	return 0
}

// reclaimDaemon adopts or stops leftover instances of a singleton daemon of
// this cluster (see reclaim) and returns its live pid, or 0.
func (c *Cluster) reclaimDaemon(ctx context.Context, d daemon) int {
	return c.reclaim(ctx, d.name, "", c.pidFile(d.name))
}

// startEtcd starts etcd (the distribution's, as the Vitess examples do) and
// registers the cell.
func (c *Cluster) startEtcd(ctx context.Context) error {
	if c.reclaimDaemon(ctx, etcdD) == 0 {
		if code, _, err := httpGet(ctx, fmt.Sprintf("http://localhost:%d/health", c.port(EtcdClientPort))); err == nil {
			return fmt.Errorf("something not started by vtlocal already answers on port %d (HTTP %d); stop it first", c.port(EtcdClientPort), code)
		}
		if err := c.mkdirOwned(filepath.Join(c.dataRoot, "etcd")); err != nil {
			return err
		}
		client := fmt.Sprintf("http://localhost:%d", c.port(EtcdClientPort))
		c.log.Info("starting etcd", "port", c.port(EtcdClientPort))
		if _, err := c.startDaemon(ctx, "etcd", c.logFile("etcd"), c.pidFile("etcd"),
			"--name", "vtlocal",
			"--data-dir", filepath.Join(c.dataRoot, "etcd"),
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", fmt.Sprintf("http://localhost:%d", c.port(EtcdPeerPort)),
			"--initial-advertise-peer-urls", fmt.Sprintf("http://localhost:%d", c.port(EtcdPeerPort)),
			"--initial-cluster", fmt.Sprintf("vtlocal=http://localhost:%d", c.port(EtcdPeerPort)),
		); err != nil {
			return err
		}
	}
	if err := c.waitHTTP(ctx, "etcd", fmt.Sprintf("http://localhost:%d/health", c.port(EtcdClientPort)), func() error {
		if c.daemonPid(etcdD) == 0 {
			return errors.New("etcd exited")
		}
		return nil
	}, c.logFile("etcd")); err != nil {
		return err
	}
	// Register the cell through the topology directly ("--server internal"):
	// vtctld is not running yet and needs the cell to exist.
	internal := func(args ...string) ([]byte, error) {
		full := append([]string{"--server", "internal"}, c.TopoFlags()...)
		return c.run(ctx, nil, filepath.Join(c.binDir, "vtctldclient"), append(full, args...)...)
	}
	if out, err := internal("GetCellInfoNames"); err == nil && strings.Contains(string(out), Cell) {
		return nil
	}
	c.log.Info("adding cell", "cell", Cell)
	_, err := internal("AddCellInfo", "--root", "/vitess/"+Cell,
		"--server-address", fmt.Sprintf("localhost:%d", c.port(EtcdClientPort)), Cell)
	return err
}

func (c *Cluster) startVtctld(ctx context.Context) error {
	if c.reclaimDaemon(ctx, vtctldD) == 0 {
		c.log.Info("starting vtctld", "web", c.port(VtctldWebPort), "grpc", c.port(VtctldGRPCPort))
		args := append(c.TopoFlags(),
			"--config-file-not-found-handling=ignore",
			"--log-format", "text",
			"--service-map", "grpc-vtctl,grpc-vtctld",
			"--backup-storage-implementation", "file",
			"--file-backup-storage-root", filepath.Join(c.dataRoot, "backups"),
			"--port", strconv.Itoa(c.port(VtctldWebPort)),
			"--grpc-port", strconv.Itoa(c.port(VtctldGRPCPort)),
		)
		if _, err := c.startDaemon(ctx, filepath.Join(c.binDir, "vtctld"), c.logFile("vtctld"), c.pidFile("vtctld"), args...); err != nil {
			return err
		}
	}
	if err := c.waitHTTP(ctx, "vtctld", fmt.Sprintf("http://localhost:%d/debug/status", c.port(VtctldWebPort)), func() error {
		if c.daemonPid(vtctldD) == 0 {
			return errors.New("vtctld exited")
		}
		return nil
	}, c.logFile("vtctld")); err != nil {
		return err
	}
	return c.poll(ctx, c.timeout, "vtctld gRPC", func() (bool, error) {
		_, err := c.vtctl(ctx, "GetCellInfoNames")
		return err == nil, err
	})
}

func (c *Cluster) startVtgate(ctx context.Context) error {
	if c.reclaimDaemon(ctx, vtgateD) != 0 {
		return nil
	}
	c.log.Info("starting vtgate", "web", c.port(VtgateWebPort), "grpc", c.port(VtgateGRPCPort), "mysql", c.MySQLAddr())
	args := append(c.TopoFlags(),
		"--config-file-not-found-handling=ignore",
		"--log-format", "text",
		"--port", strconv.Itoa(c.port(VtgateWebPort)),
		"--grpc-port", strconv.Itoa(c.port(VtgateGRPCPort)),
		"--mysql-server-port", strconv.Itoa(c.port(VtgateMySQLPort)),
		"--mysql-server-bind-address", "127.0.0.1",
		"--mysql-auth-server-impl", "none",
		"--cell", Cell,
		"--cells-to-watch", Cell,
		"--tablet-types-to-wait", "PRIMARY",
		// vtgate re-reads the tablet list every minute by default: new
		// shards' primaries would be "no healthy tablet" for up to 60 s.
		"--tablet-refresh-interval", "2s",
		// Buffer primary traffic during SwitchTraffic/reparents instead
		// of failing it, as a production vtgate would.
		"--enable-buffer",
		"--service-map", "grpc-vtgateservice",
	)
	_, err := c.startDaemon(ctx, filepath.Join(c.binDir, "vtgate"), c.logFile("vtgate"), c.pidFile("vtgate"), args...)
	return err
}

// waitVtgate waits until vtgate answers SQL on every keyspace that has
// tables: its web port comes up before it has seen the tablets, so a
// client connecting right after start would get "no healthy tablet".
func (c *Cluster) waitVtgate(ctx context.Context, probes []string) error {
	if err := c.waitHTTP(ctx, "vtgate", fmt.Sprintf("http://localhost:%d/debug/status", c.port(VtgateWebPort)), func() error {
		if c.daemonPid(vtgateD) == 0 {
			return errors.New("vtgate exited")
		}
		return nil
	}, c.logFile("vtgate")); err != nil {
		return err
	}
	db, err := c.OpenDB("")
	if err != nil {
		return err
	}
	defer db.Close()
	err = c.poll(ctx, c.timeout, "vtgate to serve "+strings.Join(probes, ", "), func() (bool, error) {
		if c.daemonPid(vtgateD) == 0 {
			return false, fatal(errors.New("vtgate exited"))
		}
		for _, q := range probes {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			rows, err := db.QueryContext(qctx, q)
			if err == nil {
				err = rows.Close()
			}
			cancel()
			if err != nil {
				return false, fmt.Errorf("%s: %w", q, err)
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n--- %s ---\n%s", err, c.logFile("vtgate"), fileTail(c.logFile("vtgate"), 20))
	}
	return nil
}

// OpenDB opens a database/sql handle on vtgate's MySQL port, with keyspace
// as the default database ("" for none). Interpolation is on so that
// queries with arguments need no server-side prepared statements.
func (c *Cluster) OpenDB(keyspace string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = c.MySQLAddr()
	cfg.DBName = keyspace
	cfg.InterpolateParams = true
	cfg.Timeout = 5 * time.Second
	return sql.Open("mysql", cfg.FormatDSN())
}

// RestartVtgate stops vtgate gracefully, starts it again and waits until it
// serves queries on the cluster's keyspaces.
func (c *Cluster) RestartVtgate(ctx context.Context) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if pid := c.daemonPid(vtgateD); pid != 0 {
		c.log.Info("stopping vtgate", "pid", pid)
		if err := stopPid(ctx, pid, "vtgate", 30*time.Second); err != nil {
			return err
		}
	}
	if err := c.startVtgate(ctx); err != nil {
		return err
	}
	return c.waitVtgate(ctx, c.probes(ctx))
}

// probes are cheap queries proving vtgate routes to every keyspace: a
// count over one table of each keyspace needs a healthy primary in every
// serving shard (a query on dual would be answered by vtgate itself).
// Keyspaces with a stopped tablet (StopTablet) are skipped: vtgate cannot
// serve them until the tablet is back.
func (c *Cluster) probes(ctx context.Context) []string {
	ks, err := c.keyspaces(ctx)
	if err != nil {
		return []string{"select 1 from dual"}
	}
	down := map[string]bool{}
	if recs, err := c.Tablets(); err == nil {
		for _, r := range recs {
			if !c.vttabletAlive(r.UID) {
				down[r.Keyspace] = true
			}
		}
	}
	var qs []string
	for _, k := range ks {
		if down[k] || !validIdent.MatchString(k) {
			continue
		}
		vs, err := c.getVSchema(ctx, k)
		if err != nil {
			continue
		}
		var names []string
		for t, raw := range vs.Tables {
			var def struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(raw, &def)
			if validIdent.MatchString(t) && def.Type != "sequence" {
				names = append(names, t)
			}
		}
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		qs = append(qs, "select count(*) from "+k+"."+names[0])
	}
	if len(qs) == 0 {
		qs = []string{"select 1 from dual"}
	}
	return qs
}

var validIdent = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
