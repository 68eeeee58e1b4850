package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// jsReplay reads the stream from cursor with the JavaScript client in Node
// (clients/js/bench/replay.mjs, over transport) until it has want rows,
// twice in one process. It returns the time the reader measured itself on
// its second read, from before its connection to its last row: the Go
// readers run in the test's process, warm after its first round, while
// the first read of a fresh Node process also measures V8 sizing its heap
// and compiling (and Node's start, about 0.2 s here, would count too). The
// first read's time is logged beside it.
func jsReplay(ctx context.Context, t *testing.T, g *gateway, stream, cursor, transport string, want int) (int, time.Duration, error) {
	cmd := exec.CommandContext(ctx, "node", "bench/replay.mjs")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "VSG_URL="+g.url, "STREAM="+stream, "CURSOR="+cursor, "TRANSPORT="+transport,
		"WANT="+strconv.Itoa(want))
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return 0, 0, fmt.Errorf("node replay: %v: %s", err, ee.Stderr)
		}
		return 0, 0, fmt.Errorf("node replay: %v", err)
	}
	var r struct {
		Rows int     `json:"rows"`
		MS   float64 `json:"ms"`
		Cold float64 `json:"cold_ms"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, 0, fmt.Errorf("node replay printed %q: %v", out, err)
	}
	t.Logf("JS client (Node) %s, first read in a fresh process: %d rows in %.0f ms = %.0f rows/s",
		transport, r.Rows, r.Cold, float64(r.Rows)/r.Cold*1000)
	return r.Rows, time.Duration(r.MS * float64(time.Millisecond)), nil
}
