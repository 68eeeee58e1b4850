package epoch

import (
	"testing"

	"github.com/vstream-gateway/vstream-gateway/internal/leaktest"
)

// A guard's Run loop ends with its context; none may outlive its test.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
