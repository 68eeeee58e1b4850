package auth

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
)

// Every goroutine a test starts must be gone when the tests end, the JWKS
// refresh included (it ends with the context given to New).
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
