package hub

import (
	"testing"

	"go.uber.org/goleak"
)

// Every subscription, bridge stream and parked timer the tests start must
// be gone when they end. (glog, imported by Vitess, flushes from a
// goroutine started at init.)
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}
