package hub

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
)

// Every subscription, bridge stream and parked timer the tests start must
// be gone when they end.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
