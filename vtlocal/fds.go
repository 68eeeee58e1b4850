package vtlocal

import (
	"os"
	"strconv"
	"syscall"
)

// closeInheritedFDs marks every descriptor above stderr close-on-exec.
//
// Go opens its own files close-on-exec, but descriptors the process
// inherited (a lock held by `flock cmd`, a pipe of a CI runner) are passed
// on to every daemon the cluster starts, and those live on after the caller:
// a test run under `flock` would leave its lock held by mysqld and vttablet
// forever.
func closeInheritedFDs() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
