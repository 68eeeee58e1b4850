package webhook

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be gone when the tests end. (glog,
// imported by Vitess, flushes from a goroutine started at init that
// cannot be stopped.)
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}
