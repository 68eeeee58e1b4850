package epoch

import (
	"testing"

	"go.uber.org/goleak"
)

// A guard's Run loop ends with its context; none may outlive its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
