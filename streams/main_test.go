package streams

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
)

// The registry refreshes cached definitions in the background; no refresh
// may outlive the test that started it.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
