package handlers

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be gone when the tests end. Two
// cannot be stopped and are left alone: glog's flush daemon (imported by
// Vitess, started at init) and the sweeper of the verified token cache's
// LRU in auth (golang-lru/v2's expirable has no Close; in the gateway the
// verifier lives as long as the process).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"))
}
