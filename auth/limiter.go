package auth

import (
	"time"

	"golang.org/x/time/rate"
)

// newUnknownKIDLimiter paces JWKS fetches triggered by unknown key ids:
// one per every (and one at once).
func newUnknownKIDLimiter(every time.Duration) *rate.Limiter {
	if every <= 0 {
		return rate.NewLimiter(rate.Inf, 1)
	}
	return rate.NewLimiter(rate.Every(every), 1)
}
