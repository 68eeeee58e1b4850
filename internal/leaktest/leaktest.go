// Package leaktest is the goroutine-leak check (goleak) that every package
// whose tests start goroutines runs from its TestMain:
//
//	func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
//
// It knows the goroutines that cannot be stopped and are not leaks: glog's
// flush daemon (imported by Vitess, started at init) and the sweeper of
// golang-lru/v2's expirable cache (no Close; auth's verified-token cache
// lives as long as the process).
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// Ignored are the goroutines that outlive every test by design.
func Ignored() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"),
	}
}

// VerifyTestMain runs the tests and fails them if a goroutine other than
// the Ignored ones (and those opts ignore) is left when they end.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(Ignored(), opts...)...)
}
