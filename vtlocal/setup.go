package vtlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Binaries are the Vitess programs the cluster needs.
var Binaries = []string{"vtctld", "vtgate", "vttablet", "mysqlctl", "vtctldclient"}

// Packages are the Debian packages the cluster needs. redis-server is not
// used by the cluster itself but by the gateway's tests next to it.
var Packages = []string{"mariadb-server", "mariadb-client", "etcd-server", "etcd-client", "redis-server"}

const vitessModule = "vitess.io/vitess"

// moduleInfo is the subset of `go list -m -json` we need.
type moduleInfo struct {
	Path    string
	Version string
	Dir     string
	Replace *moduleInfo
}

// vitess returns the Vitess module pinned by the repository's go.mod, with
// its directory in the module cache (downloading it if needed): the example
// schema/vschema files and config/init_db.sql are read from there.
func (c *Cluster) vitess(ctx context.Context) (*moduleInfo, error) {
	goBin := goTool()
	cmd := exec.CommandContext(ctx, goBin, "list", "-m", "-json", vitessModule)
	cmd.Dir = c.repoDir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, &cmdError{cmd: "go list -m " + vitessModule, err: err, tail: lastLines(errb.String(), 20)}
	}
	var m moduleInfo
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return nil, err
	}
	if m.Replace != nil {
		if m.Replace.Version == "" {
			return nil, fmt.Errorf("%s is replaced by a local directory (%s); vtlocal needs a released version", vitessModule, m.Replace.Path)
		}
		m.Version, m.Dir = m.Replace.Version, m.Replace.Dir
	}
	if m.Dir == "" {
		cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", vitessModule+"@"+m.Version)
		cmd.Dir = c.repoDir
		out.Reset()
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return nil, &cmdError{cmd: "go mod download " + vitessModule, err: err, tail: lastLines(errb.String()+out.String(), 20)}
		}
		var d moduleInfo
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			return nil, err
		}
		m.Dir = d.Dir
	}
	return &m, nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// EnsureBinaries makes sure the Vitess binaries of the version pinned in
// go.mod are in the bin directory, building them only when one is missing
// or was built from another version. A cold build takes 4–5 minutes on two
// cores, so reuse matters.
func (c *Cluster) EnsureBinaries(ctx context.Context) error {
	m, err := c.vitess(ctx)
	if err != nil {
		return err
	}
	want := vitessModule + " " + m.Version
	stamp := filepath.Join(c.binDir, "VERSION")
	if c.binariesMatch(ctx, stamp, m.Version) {
		c.log.Debug("vitess binaries up to date", "dir", c.binDir, "version", m.Version)
		return nil
	}
	if err := os.MkdirAll(c.binDir, 0o755); err != nil {
		return err
	}
	c.log.Info("building vitess binaries (cold build takes ~5 min on 2 cores)", "version", m.Version, "dir", c.binDir)
	start := time.Now()
	// Build inside a throw-away module that requires only Vitess: the
	// project's go.mod and go.sum stay untouched, and `go install
	// pkg@version` is refused because Vitess's go.mod has exclude
	// directives.
	tmp, err := os.MkdirTemp("", "vtlocal-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mod := fmt.Sprintf("module vtlocal-build\n\ngo 1.21\n\nrequire %s %s\n", vitessModule, m.Version)
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte(mod), 0o644); err != nil {
		return err
	}
	args := []string{"build", "-o", c.binDir + string(filepath.Separator)}
	for _, b := range Binaries {
		args = append(args, vitessModule+"/go/cmd/"+b)
	}
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &cmdError{cmd: "go " + strings.Join(args, " "), err: err, tail: lastLines(out.String(), 30)}
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
		return err
	}
	c.log.Info("vitess binaries built", "version", m.Version, "took", time.Since(start).Round(time.Second))
	return nil
}

// binariesMatch checks the stamp file, or, when there is none (binaries
// built by hand with go build), the module version recorded in each binary
// by the Go toolchain, and then writes the stamp.
func (c *Cluster) binariesMatch(ctx context.Context, stamp, version string) bool {
	for _, b := range Binaries {
		if fi, err := os.Stat(filepath.Join(c.binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	want := vitessModule + " " + version
	if b, err := os.ReadFile(stamp); err == nil {
		return strings.TrimSpace(string(b)) == want
	}
	for _, b := range Binaries {
		cmd := exec.CommandContext(ctx, goTool(), "version", "-m", filepath.Join(c.binDir, b))
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte("\tmod\t"+vitessModule+"\t"+version+"\t")) {
			return false
		}
	}
	_ = os.WriteFile(stamp, []byte(want+"\n"), 0o644)
	return true
}

// EnsurePackages apt-installs the Debian packages the cluster needs if any
// is missing. The distribution's MariaDB, etcd and Redis services must not
// start (they would take port 3306/2379/6379 and memory), so a policy-rc.d
// that forbids service starts is in place during the install.
func (c *Cluster) EnsurePackages(ctx context.Context) error {
	var missing []string
	for _, p := range Packages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${db:Status-Status}", p).Output()
		if err != nil || strings.TrimSpace(string(out)) != "installed" {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing packages %v: run as root, or apt-get install them", missing)
	}
	c.log.Info("installing packages", "packages", missing)
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\n# services must not start during package installation\nexit 101\n"), 0o755); err != nil {
			return err
		}
		defer os.Remove(policy)
	}
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return &cmdError{cmd: "apt-get " + strings.Join(args, " "), err: err, tail: lastLines(out.String(), 20)}
		}
		return nil
	}
	if needAptUpdate(ctx, missing) {
		c.log.Info("apt-get update")
		if err := apt("update"); err != nil {
			return err
		}
	}
	return apt(append([]string{"install", "-y", "--no-install-recommends"}, missing...)...)
}

// needAptUpdate reports whether the package lists are absent or do not know
// one of the packages; a fresh container has no lists at all.
func needAptUpdate(ctx context.Context, pkgs []string) bool {
	lists, _ := filepath.Glob("/var/lib/apt/lists/*_Packages*")
	if len(lists) == 0 {
		return true
	}
	for _, p := range pkgs {
		out, err := exec.CommandContext(ctx, "apt-cache", "policy", p).Output()
		if err != nil || !bytes.Contains(out, []byte("Candidate:")) || bytes.Contains(out, []byte("Candidate: (none)")) {
			return true
		}
	}
	return false
}
