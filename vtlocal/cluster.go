// Package vtlocal runs a small, real Vitess cluster on the local machine for
// development and end-to-end tests: etcd, vtctld, one MariaDB-backed primary
// vttablet per shard and a vtgate, shaped like Vitess's examples/local.
//
// The cluster it builds with Up is the example's state after step 301:
// keyspace commerce (product + the customer_seq/order_seq sequences) and
// keyspace customer with a single shard 0 but the sharded (xxhash) vschema,
// so it can be resharded with AddShards, Reshard, SwitchTraffic and Complete.
//
// Daemons run detached from the calling process (they survive it) as an
// unprivileged user, because mysqld refuses to run as root. Everything the
// cluster writes lives under the data root, which Down deletes.
package vtlocal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Fixed ports, the same as Vitess's examples/local, so that the example
// documentation and tools (mysql -P 15306, vtctldclient --server
// localhost:15999) work unchanged against this cluster.
const (
	EtcdClientPort  = 2379
	EtcdPeerPort    = 2380
	VtctldWebPort   = 15000
	VtctldGRPCPort  = 15999
	VtgateWebPort   = 15001
	VtgateGRPCPort  = 15991
	VtgateMySQLPort = 15306

	// Cell is the single cell of the cluster.
	Cell = "zone1"
)

// The tablet port bases: a tablet with uid N listens on 15000+N (web),
// 16000+N (gRPC) and its mysqld on 17000+N. Uids are multiples of 100 below
// 1000 so that the ranges never collide with each other or with vtctld/vtgate.
const (
	tabletWebBase   = 15000
	tabletGRPCBase  = 16000
	tabletMySQLBase = 17000
	maxTabletUID    = 900
)

// DefaultDataRoot lives outside the repository: mysqld data, binlogs and
// logs are large and must be owned by the unprivileged user, which cannot
// write into a root-owned checkout.
const DefaultDataRoot = "/var/tmp/vsg-vtdataroot"

// DefaultRunUser is the account the daemons run as when the caller is root.
const DefaultRunUser = "vitess"

const modulePath = "github.com/vstream-gateway/vstream-gateway"

// Cluster is a handle on the local cluster. It holds no live state itself:
// every method re-reads pid files, the uid record in the data root and the
// topology, so a Cluster created by a test can manage a cluster started by
// the CLI and vice versa.
type Cluster struct {
	dataRoot string
	binDir   string
	repoDir  string
	runUser  string
	log      *slog.Logger
	timeout  time.Duration
	offset   int // added to every port, see WithPortOffset
}

// Option configures a Cluster.
type Option func(*Cluster)

// WithDataRoot sets the directory holding all cluster state.
func WithDataRoot(dir string) Option { return func(c *Cluster) { c.dataRoot = dir } }

// WithBinDir sets where the Vitess binaries are (and are built to).
func WithBinDir(dir string) Option { return func(c *Cluster) { c.binDir = dir } }

// WithRepoDir sets the Go module whose go.mod pins the Vitess version.
func WithRepoDir(dir string) Option { return func(c *Cluster) { c.repoDir = dir } }

// WithRunUser sets the unprivileged account used when running as root.
func WithRunUser(name string) Option { return func(c *Cluster) { c.runUser = name } }

// WithLogger sets the progress logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Cluster) { c.log = l } }

// WithPortOffset adds n to every port (etcd, vtctld, vtgate, tablets), so
// that a second, private cluster (with its own data root) can run next to
// the shared one; tests that reshard use it to leave the shared cluster
// alone. The default, 0, gives the example's ports.
func WithPortOffset(n int) Option { return func(c *Cluster) { c.offset = n } }

// WithStepTimeout bounds each individual wait (a tablet becoming primary, a
// copy phase finishing, ...). The default, 3 minutes, is generous for a
// 2-core machine; the whole of Up takes well under a minute.
func WithStepTimeout(d time.Duration) Option { return func(c *Cluster) { c.timeout = d } }

// New returns a Cluster with defaults: data root DefaultDataRoot, binaries in
// <repo>/.vitess/bin where <repo> is found by walking up from the working
// directory to this project's go.mod.
func New(opts ...Option) (*Cluster, error) {
	closeInheritedFDs()
	c := &Cluster{
		dataRoot: DefaultDataRoot,
		runUser:  DefaultRunUser,
		log:      slog.Default(),
		timeout:  3 * time.Minute,
	}
	for _, o := range opts {
		o(c)
	}
	if c.repoDir == "" {
		dir, err := findRepo()
		if err != nil {
			return nil, err
		}
		c.repoDir = dir
	}
	if c.binDir == "" {
		c.binDir = filepath.Join(c.repoDir, ".vitess", "bin")
	}
	var err error
	if c.dataRoot, err = filepath.Abs(c.dataRoot); err != nil {
		return nil, err
	}
	if c.binDir, err = filepath.Abs(c.binDir); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		// Not root: run everything as ourselves; we must own the data root.
		c.runUser = ""
	}
	return c, nil
}

// findRepo walks up from the working directory to the go.mod of this module,
// so the default works from the repository root (CLI) and from a package
// directory (go test).
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+modulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vtlocal: cannot find the repository (go.mod of " + modulePath + "); use WithRepoDir")
		}
		dir = parent
	}
}

// DataRoot is the directory holding all cluster state and logs.
func (c *Cluster) DataRoot() string { return c.dataRoot }

// BinDir is the directory holding the Vitess binaries.
func (c *Cluster) BinDir() string { return c.binDir }

// MySQLAddr is vtgate's MySQL protocol address (user root, no password).
func (c *Cluster) MySQLAddr() string { return fmt.Sprintf("127.0.0.1:%d", c.port(VtgateMySQLPort)) }

// VtgateAddr is vtgate's gRPC address (VStream, Execute).
func (c *Cluster) VtgateAddr() string { return fmt.Sprintf("localhost:%d", c.port(VtgateGRPCPort)) }

// VtctldAddr is vtctld's gRPC address, for vtctldclient --server.
func (c *Cluster) VtctldAddr() string { return fmt.Sprintf("localhost:%d", c.port(VtctldGRPCPort)) }

// EtcdAddr is the topology server's client address.
func (c *Cluster) EtcdAddr() string { return fmt.Sprintf("localhost:%d", c.port(EtcdClientPort)) }

// port maps one of the default ports to this cluster's.
func (c *Cluster) port(p int) int { return p + c.offset }

// Tablet ports for uid.
func (c *Cluster) tabletWebPort(uid int) int   { return c.port(tabletWebBase + uid) }
func (c *Cluster) tabletGRPCPort(uid int) int  { return c.port(tabletGRPCBase + uid) }
func (c *Cluster) tabletMySQLPort(uid int) int { return c.port(tabletMySQLBase + uid) }

// TopoFlags are the flags every Vitess binary needs to find the topology.
func (c *Cluster) TopoFlags() []string {
	return []string{
		"--topo-implementation", "etcd2",
		"--topo-global-server-address", c.EtcdAddr(),
		"--topo-global-root", "/vitess/global",
	}
}

// TabletAlias is the topology alias of tablet uid, e.g. zone1-0000000100.
func TabletAlias(uid int) string { return fmt.Sprintf("%s-%010d", Cell, uid) }

func (c *Cluster) tmpDir() string             { return filepath.Join(c.dataRoot, "tmp") }
func (c *Cluster) pidFile(name string) string { return filepath.Join(c.tmpDir(), name+".pid") }
func (c *Cluster) logFile(name string) string { return filepath.Join(c.tmpDir(), name+".log") }
func (c *Cluster) tabletDir(uid int) string {
	return filepath.Join(c.dataRoot, fmt.Sprintf("vt_%010d", uid))
}
