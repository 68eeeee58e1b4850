package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// class is what an attempt's outcome means for its batch.
type class int

const (
	// classDelivered: 2xx, the batch is done.
	classDelivered class = iota
	// classRetry: try the same batch again after a delay.
	classRetry
	// classPermanent: the receiver refuses this batch (4xx other than
	// 408/409/425/429); retrying cannot help, so it is dead-lettered.
	classPermanent
	// classGone: 410, the receiver asks to stop; the webhook is disabled.
	classGone
)

func (c class) String() string {
	switch c {
	case classDelivered:
		return "delivered"
	case classRetry:
		return "retryable"
	case classPermanent:
		return "permanent"
	default:
		return "gone"
	}
}

// classifyStatus maps an HTTP status to its class and the failure kind
// used as the metrics label ("" for a success).
func classifyStatus(code int) (class, string) {
	switch {
	case code >= 200 && code < 300:
		return classDelivered, ""
	case code == http.StatusGone:
		return classGone, "gone"
	case code == http.StatusTooManyRequests:
		return classRetry, "http_429"
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooEarly:
		// Transient by definition: the receiver was busy, racing, or not
		// ready for this request yet.
		return classRetry, "http_4xx_retryable"
	case code >= 400 && code < 500:
		return classPermanent, "http_4xx"
	case code >= 500:
		return classRetry, "http_5xx"
	case code >= 300 && code < 400:
		// Redirects are not followed: a receiver that moved must be
		// re-registered, and following them would bypass the address
		// check of the original URL's host. Retried in case it is a
		// transient misconfiguration.
		return classRetry, "http_3xx"
	default:
		return classRetry, "http_other"
	}
}

// ParseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date (relative to now; a date in the past means "now"). ok is false
// when the header is absent or malformed.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(100*365*24*time.Hour/time.Second) {
			n = int64(100 * 365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if d := t.Sub(now); d > 0 {
		return d, true
	}
	return 0, true
}

// Backoff is the retry schedule shared by all webhooks of a gateway.
type Backoff struct {
	// Initial is the first retry delay (before jitter).
	Initial time.Duration
	// Max caps the exponentially growing delay.
	Max time.Duration
	// MaxRetryAfter caps what a receiver's Retry-After can ask for, so a
	// bogus header cannot park a webhook for days.
	MaxRetryAfter time.Duration
}

// DefaultBackoff is 1s, 2s, 4s, … up to 10 minutes, each ±50%.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 10 * time.Minute, MaxRetryAfter: time.Hour}
}

// schedule returns a fresh per-batch delay generator.
func (b Backoff) schedule() *backoff.ExponentialBackOff {
	eb := &backoff.ExponentialBackOff{
		InitialInterval: b.Initial,
		// ±50% spreads the retries of many webhooks failing at once (a
		// receiver outage) instead of having them hit the receiver in step.
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         b.Max,
	}
	eb.Reset()
	return eb
}

// delay is how long to wait after a failed attempt: the receiver's
// Retry-After when it sent one (capped), else the next backoff step.
func (b Backoff) delay(eb *backoff.ExponentialBackOff, a *attempt) time.Duration {
	if a.hasRetryAfter {
		// The backoff still advances: if the receiver stops sending the
		// header, the schedule continues from where the failures left it.
		eb.NextBackOff()
		if a.retryAfter > b.MaxRetryAfter {
			return b.MaxRetryAfter
		}
		return a.retryAfter
	}
	return eb.NextBackOff()
}
