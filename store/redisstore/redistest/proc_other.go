//go:build !linux

package redistest

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; the server is
// still stopped by TestMain on a normal exit.
func setDeathSignal(*exec.Cmd) {}
