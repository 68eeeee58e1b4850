package vtlocal

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be gone when the tests end. Not
// counted: glog's flush daemon, started at init by the Vitess tablet
// manager client (prs.go) and impossible to stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}
