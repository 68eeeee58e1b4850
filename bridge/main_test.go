package bridge

import (
	"os"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/store/redisstore/redistest"
)

// Some tests run on a real Redis (redistest starts one). Every
// subscription, bridge stream and lease the tests start must be gone when
// they end (redistest.Main checks, as leaktest does).
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
