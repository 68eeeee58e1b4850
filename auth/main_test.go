package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts must be gone when the tests end, the JWKS
// refresh included (it ends with the context given to New). The verified
// token cache's LRU sweeps expired entries on a goroutine that cannot be
// stopped (golang-lru/v2's expirable has no Close; see the comment in its
// NewLRU): one per verifier with a cache, which lives as long as the
// process in the gateway.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"))
}
