package client

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
)

// Every goroutine a test starts must be gone when the tests end.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
