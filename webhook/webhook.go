// Package webhook pushes a stream's transactions to HTTP receivers.
//
// A webhook is a named subscriber of one stream ("webhook.<id>") whose
// cursor lives in the store and moves only when the receiver confirms a
// batch with a 2xx, or when the batch is given up on and dead-lettered.
// Batches are signed per the Standard Webhooks specification, retried with
// exponential backoff and jitter, and delivered by exactly one gateway
// replica at a time: the replica holding the webhook's store lease, whose
// fencing token guards every cursor write.
//
// Files: webhook.go (the stored definition), config.go (validation),
// repo.go (persistence), sign.go (signatures), ssrf.go (address policy),
// send.go (one HTTP attempt), retry.go (classification and backoff),
// batch.go (building a batch), deliver.go (the delivery loop),
// deadletter.go (the dead-letter list and replay), supervisor.go (leases),
// service.go (the admin operations), metrics.go (Prometheus collectors).
package webhook

import (
	"errors"
	"fmt"
	"time"

	"github.com/vstream-gateway/vstream-gateway/feed"
)

// Sentinel errors.
var (
	// ErrNotFound: no webhook with that id (on that stream).
	ErrNotFound = errors.New("webhook: not found")
	// ErrDeadLetterNotFound: no dead letter with that sequence number.
	ErrDeadLetterNotFound = errors.New("webhook: dead letter not found")
	// ErrForbiddenAddress: the URL resolves to, or a connection went to, an
	// address the gateway must not reach (loopback, private, link-local…).
	ErrForbiddenAddress = errors.New("webhook: forbidden address")
	// ErrGone: the receiver answered 410; the webhook is disabled until it
	// is resumed.
	ErrGone = errors.New("webhook: receiver is gone (410)")
	// ErrStreamEnded: the webhook's stream cannot go on from its cursor
	// (its tables were dropped and its on_gap is fail); the webhook is
	// disabled, its status says why, until it is resumed.
	ErrStreamEnded = errors.New("webhook: the stream ended")
	// errStopped: the deliverer must stop because it lost the lease or the
	// webhook was paused, disabled or deleted. Not an operational error.
	errStopped = errors.New("webhook: deliverer stopped")
)

// ValidationError names the field of a webhook request that is wrong.
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ForbiddenAddressError says which address was refused and why.
type ForbiddenAddressError struct {
	Host   string // as written in the URL
	Addr   string // the resolved IP
	Reason string // "loopback", "private", "link-local", …
}

func (e *ForbiddenAddressError) Error() string {
	if e.Host != "" && e.Host != e.Addr {
		return fmt.Sprintf("%s resolves to %s, a %s address", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("%s is a %s address", e.Addr, e.Reason)
}

// Unwrap makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *ForbiddenAddressError) Unwrap() error { return ErrForbiddenAddress }

// State is what a webhook is doing.
type State string

// Webhook states. Paused is the operator's choice; disabled is the
// receiver's (it answered 410 Gone). Resume clears both.
const (
	StateActive   State = "active"
	StatePaused   State = "paused"
	StateDisabled State = "disabled"
)

// Webhook is the stored definition of a webhook.
type Webhook struct {
	ID             string `json:"id"`
	Stream         string `json:"stream"`
	URL            string `json:"url"`
	BatchMaxEvents int    `json:"batch_max_events"`
	// BatchMaxBytes is 0 in webhooks stored before it existed: the
	// default (MaxBytes).
	BatchMaxBytes int      `json:"batch_max_bytes,omitempty"`
	BatchMaxWait  Duration `json:"batch_max_wait"`
	MaxAttempts   int      `json:"max_attempts"`
	Timeout       Duration `json:"timeout"`
	Paused        bool     `json:"paused"`
	// Format and Schemas choose the events' format (DESIGN §3.2): "" is
	// the default format, "debezium" Debezium's envelope, with schemas
	// its {schema, payload} documents.
	Format  string `json:"format,omitempty"`
	Schemas bool   `json:"schemas,omitempty"`
	// Secrets sign every request. The first is the current one; the others
	// are rotated-out secrets that keep signing until their ExpiresAt so
	// receivers can switch over without dropping a request.
	Secrets   []StoredSecret `json:"secrets"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// StoredSecret is one signing secret ("whsec_…").
type StoredSecret struct {
	Secret    string    `json:"secret"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// format is the webhook's event format (nil: the default one). Stored
// definitions were validated when created; one that no longer parses is
// delivered in the default format rather than not at all.
func (w *Webhook) format() *feed.Format {
	f, err := feed.NewFormat(w.Format, w.Schemas, w.Stream)
	if err != nil {
		return nil
	}
	return f
}

// Subscriber is the webhook's subscriber name: its cursor is stored like
// every named subscriber's, so reshard handling in hub.Open applies.
func (w *Webhook) Subscriber() string { return SubscriberName(w.ID) }

// SubscriberName is the subscriber name of webhook id.
func SubscriberName(id string) string { return "webhook." + id }

// leaseName is the store lease whose holder delivers the webhook.
func leaseName(id string) string { return "webhook/" + id }

// signingKeys returns the decoded keys of the secrets still valid at now.
func (w *Webhook) signingKeys(now time.Time) [][]byte {
	keys := make([][]byte, 0, len(w.Secrets))
	for _, s := range w.Secrets {
		if !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt) {
			continue
		}
		if k, err := ParseSecret(s.Secret); err == nil {
			keys = append(keys, k)
		}
	}
	return keys
}

// Status is what the delivering replica records about a webhook. It is
// kept apart from the definition so that operator edits and the
// deliverer's writes never overwrite each other.
type Status struct {
	Disabled       bool      `json:"disabled"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	DisabledAt     time.Time `json:"disabled_at,omitzero"`
}

// MaxBytes is the webhook's batch_max_bytes.
func (w *Webhook) MaxBytes() int {
	if w.BatchMaxBytes <= 0 {
		return DefaultBatchMaxBytes
	}
	return w.BatchMaxBytes
}
