package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A network stall: every packet to and from a TCP port on loopback is
// dropped, not refused — the fault of a cable pulled, a firewall or a
// partition. TCP retransmits into the void and neither end hears of it; to
// gRPC the connection looks open. Made with iptables (and ip6tables: the
// gateway dials localhost, which may be ::1), dropping in INPUT on lo both
// directions of the port: --dport drops what goes to the server, --sport
// what comes back, so no heartbeat trickles through.
//
// Rules carry the comment stallComment(port): a run that crashed with a
// stall in place left rules a later run finds by it and removes (at the
// start of every stall, and in t.Cleanup).

var stallTools = []string{"iptables", "ip6tables"}

func stallComment(port int) string { return "vsg-e2e-stall-" + strconv.Itoa(port) }

// stallTool finds tool on PATH or in /usr/sbin (not on every root's
// PATH); "" when it is not installed.
func stallTool(tool string) string {
	if p, err := exec.LookPath(tool); err == nil {
		return p
	}
	if p, err := exec.LookPath("/usr/sbin/" + tool); err == nil {
		return p
	}
	return ""
}

// needNetStall skips the test when it cannot make a stall: not root, or
// iptables missing (.ci/run installs it). Under CI=1 that is a failure: a
// fresh CI machine must run the test.
func needNetStall(t *testing.T) {
	t.Helper()
	var why string
	if os.Geteuid() != 0 {
		why = "not root (iptables needs it)"
	}
	for _, tool := range stallTools {
		if stallTool(tool) == "" && why == "" {
			why = tool + " is not installed (apt-get install iptables)"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "1" {
		t.Fatalf("network stall test: %s; CI must run it", why)
	}
	t.Skipf("network stall test skipped: %s", why)
}

// stallPort drops every packet to and from port on loopback until the
// returned heal is called; heal is also registered with t.Cleanup, so the
// rules go whatever happens to the test.
func stallPort(t *testing.T, ctx context.Context, port int) (heal func()) {
	t.Helper()
	removeStallRules(t, port) // what a crashed run left
	comment := stallComment(port)
	healed := false
	heal = func() {
		if !healed {
			healed = true
			removeStallRules(t, port)
		}
	}
	t.Cleanup(heal)
	for _, tool := range stallTools {
		for _, dir := range []string{"--dport", "--sport"} {
			args := []string{"-w", "5", "-I", "INPUT", "-i", "lo", "-p", "tcp", dir, strconv.Itoa(port),
				"-m", "comment", "--comment", comment, "-j", "DROP"}
			if out, err := exec.CommandContext(ctx, stallTool(tool), args...).CombinedOutput(); err != nil {
				heal()
				t.Fatalf("%s %s: %v: %s", tool, strings.Join(args, " "), err, out)
			}
		}
	}
	return heal
}

// removeStallRules deletes every INPUT rule carrying port's stall comment.
func removeStallRules(t *testing.T, port int) {
	t.Helper()
	if err := clearStallRules(port); err != nil {
		t.Error(err)
	}
}

// clearStallRules deletes every INPUT rule carrying port's stall comment.
// TestMain calls it too: a run killed during a stall must not leave the
// next one without vtgate.
func clearStallRules(port int) error {
	comment := stallComment(port)
	var errs []error
	for _, tool := range stallTools {
		path := stallTool(tool)
		if path == "" || os.Geteuid() != 0 {
			continue // no rules could have been made
		}
		out, err := exec.Command(path, "-w", "5", "-S", "INPUT").CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s -S INPUT: %v: %s", tool, err, out))
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || !containsComment(f, comment) {
				continue
			}
			args := append([]string{"-w", "5", "-D"}, f[1:]...)
			if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("remove the stall rule %q: %v: %s", line, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

func containsComment(fields []string, comment string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "--comment" && strings.Trim(fields[i+1], `"`) == comment {
			return true
		}
	}
	return false
}

// stallRules counts the rules in place for port (a check that heal worked).
func stallRules(port int) (int, error) {
	n := 0
	for _, tool := range stallTools {
		out, err := exec.Command(stallTool(tool), "-w", "5", "-S", "INPUT").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s -S INPUT: %v: %s", tool, err, out)
		}
		n += strings.Count(string(out), "--comment "+stallComment(port)+" ")
	}
	return n, nil
}

// sleepCtx waits d unless ctx ends first: for a fault whose length is the
// scenario, not for a condition.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clearVtgateStall removes what a run killed during a stall of this
// cluster's vtgate left.
func clearVtgateStall() error {
	_, portText, err := net.SplitHostPort(cluster.VtgateAddr())
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	return clearStallRules(port)
}
