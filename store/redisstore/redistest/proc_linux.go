package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the private redis-server if the test binary dies
// without running its cleanup (timeout panic, SIGKILL).
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
