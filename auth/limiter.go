package auth

import (
	"time"

	"golang.org/x/time/rate"
)

// newLimiter allows one event per every (and one at once).
func newLimiter(every time.Duration) *rate.Limiter {
	if every <= 0 {
		return rate.NewLimiter(rate.Inf, 1)
	}
	return rate.NewLimiter(rate.Every(every), 1)
}
