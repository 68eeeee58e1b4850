package webhook

import (
	"log/slog"
	"os"
)

// WH_TEST_LOG=<file> writes the services' debug logs there, for chasing a
// failing test.
func init() {
	if p := os.Getenv("WH_TEST_LOG"); p != "" {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
			testLogger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
}
