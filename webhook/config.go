package webhook

import (
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vstream-gateway/vstream-gateway/feed"
)

// Duration is a time.Duration that reads and writes JSON as "1.5s" and
// also accepts a plain number of seconds.
type Duration time.Duration

// D returns the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "500ms", "2s", or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return err
	}
	if math.IsNaN(secs) || math.IsInf(secs, 0) || math.Abs(secs) > 1e9 {
		return &json.UnsupportedValueError{Str: strconv.FormatFloat(secs, 'g', -1, 64)}
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Defaults and bounds of a webhook's settings.
const (
	DefaultBatchMaxEvents = 100
	MaxBatchMaxEvents     = 10000
	// batch_max_bytes bounds a batch's events in encoded bytes: a batch of
	// whole transactions ends before one that would pass it (one larger
	// is sent alone), and a chunked transaction (DESIGN §3.1) is cut into
	// parts of at most this size (or batch_max_events), the cursor on the
	// last.
	DefaultBatchMaxBytes = 4 << 20
	MinBatchMaxBytes     = 1 << 10
	MaxBatchMaxBytes     = 64 << 20
	DefaultBatchMaxWait  = 0
	MaxBatchMaxWait      = time.Minute
	DefaultMaxAttempts   = 12
	MaxMaxAttempts       = 1000
	DefaultTimeout       = 10 * time.Second
	MinTimeout           = 100 * time.Millisecond
	MaxTimeout           = 2 * time.Minute
	maxURLLen            = 2048
	// DefaultSecretGrace is how long a rotated-out secret keeps signing.
	DefaultSecretGrace = 24 * time.Hour
	MaxSecretGrace     = 30 * 24 * time.Hour
)

// CreateRequest is the body of POST /v1/streams/{stream}/webhooks.
type CreateRequest struct {
	URL string `json:"url"`
	// Secret is optional: one is generated (and returned once) when absent.
	Secret         string    `json:"secret,omitempty"`
	BatchMaxEvents int       `json:"batch_max_events,omitempty"`
	BatchMaxBytes  int       `json:"batch_max_bytes,omitempty"`
	BatchMaxWait   *Duration `json:"batch_max_wait,omitempty"`
	MaxAttempts    int       `json:"max_attempts,omitempty"`
	Timeout        *Duration `json:"timeout,omitempty"`
	// Cursor optionally starts the webhook right after this cursor token
	// instead of at the stream's current position.
	Cursor string `json:"cursor,omitempty"`
	// Format is "default" (or absent) or "debezium"; Schemas asks for
	// Debezium's {schema, payload} documents (DESIGN §3.2).
	Format  string `json:"format,omitempty"`
	Schemas bool   `json:"schemas,omitempty"`
}

// RotateRequest is the body of the secret rotation endpoint. Both fields
// are optional.
type RotateRequest struct {
	Secret string    `json:"secret,omitempty"`
	Grace  *Duration `json:"grace,omitempty"`
}

// settings validates r and returns a webhook with defaults filled in (no
// id, secret or times yet). The URL's syntax is checked here; where it
// points is checked by the address policy.
func (r *CreateRequest) settings() (*Webhook, error) {
	w := &Webhook{
		URL:            strings.TrimSpace(r.URL),
		BatchMaxEvents: r.BatchMaxEvents,
		BatchMaxBytes:  r.BatchMaxBytes,
		BatchMaxWait:   Duration(DefaultBatchMaxWait),
		MaxAttempts:    r.MaxAttempts,
		Timeout:        Duration(DefaultTimeout),
		Schemas:        r.Schemas,
	}
	if _, err := parseURL(w.URL); err != nil {
		return nil, err
	}
	if _, err := feed.NewFormat(r.Format, r.Schemas, ""); err != nil {
		field := "format"
		if errors.Is(err, feed.ErrSchemas) {
			field = "schemas"
		}
		return nil, invalid(field, "%v", err)
	}
	if r.Format != feed.FormatDefault {
		w.Format = r.Format
	}
	switch {
	case w.BatchMaxEvents == 0:
		w.BatchMaxEvents = DefaultBatchMaxEvents
	case w.BatchMaxEvents < 1 || w.BatchMaxEvents > MaxBatchMaxEvents:
		return nil, invalid("batch_max_events", "must be between 1 and %d", MaxBatchMaxEvents)
	}
	switch {
	case w.BatchMaxBytes == 0:
		w.BatchMaxBytes = DefaultBatchMaxBytes
	case w.BatchMaxBytes < MinBatchMaxBytes || w.BatchMaxBytes > MaxBatchMaxBytes:
		return nil, invalid("batch_max_bytes", "must be between %d and %d", MinBatchMaxBytes, MaxBatchMaxBytes)
	}
	if r.BatchMaxWait != nil {
		if d := r.BatchMaxWait.D(); d < 0 || d > MaxBatchMaxWait {
			return nil, invalid("batch_max_wait", "must be between 0s and %s", MaxBatchMaxWait)
		}
		w.BatchMaxWait = *r.BatchMaxWait
	}
	switch {
	case w.MaxAttempts == 0:
		w.MaxAttempts = DefaultMaxAttempts
	case w.MaxAttempts < 1 || w.MaxAttempts > MaxMaxAttempts:
		return nil, invalid("max_attempts", "must be between 1 and %d", MaxMaxAttempts)
	}
	if r.Timeout != nil {
		if d := r.Timeout.D(); d < MinTimeout || d > MaxTimeout {
			return nil, invalid("timeout", "must be between %s and %s", MinTimeout, MaxTimeout)
		}
		w.Timeout = *r.Timeout
	}
	if r.Secret != "" {
		if _, err := ParseSecret(r.Secret); err != nil {
			return nil, invalid("secret", "%v", err)
		}
	}
	return w, nil
}

// parseURL checks a webhook URL's syntax: absolute http(s) with a host, no
// credentials (they would end up in logs and listings), no fragment.
func parseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, invalid("url", "is required")
	}
	if len(raw) > maxURLLen {
		return nil, invalid("url", "is longer than %d bytes", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalid("url", "is not a valid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalid("url", "must be an http:// or https:// URL")
	}
	if u.Hostname() == "" {
		return nil, invalid("url", "has no host")
	}
	if u.User != nil {
		return nil, invalid("url", "must not contain credentials; authenticate the receiver with the signature")
	}
	if u.Fragment != "" {
		return nil, invalid("url", "must not contain a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, invalid("url", "has an invalid port")
		}
	}
	return u, nil
}
