package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// jsReplay reads the stream from cursor with the JavaScript client in Node
// (clients/js/bench/replay.mjs, over transport) until it has want rows.
// The time measured includes Node's start (about 50 ms), which only
// understates the client.
func jsReplay(ctx context.Context, g *gateway, stream, cursor, transport string, want int) (int, error) {
	cmd := exec.CommandContext(ctx, "node", "bench/replay.mjs")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "VSG_URL="+g.url, "STREAM="+stream, "CURSOR="+cursor, "TRANSPORT="+transport,
		"WANT="+strconv.Itoa(want))
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return 0, fmt.Errorf("node replay: %v: %s", err, ee.Stderr)
		}
		return 0, fmt.Errorf("node replay: %v", err)
	}
	var r struct {
		Rows int `json:"rows"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("node replay printed %q: %v", out, err)
	}
	return r.Rows, nil
}
