package streams

import (
	"testing"

	"go.uber.org/goleak"
)

// The registry refreshes cached definitions in the background; no refresh
// may outlive the test that started it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}
