package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const (
	secretPrefix = "whsec_"
	// Standard Webhooks asks for keys of 24 to 64 bytes; generated ones
	// are 32.
	minSecretBytes = 24
	maxSecretBytes = 64
	genSecretBytes = 32
	// DefaultTolerance is how far a webhook-timestamp may be from the
	// receiver's clock before Verify refuses it (replay protection).
	DefaultTolerance = 5 * time.Minute
)

// Verification errors.
var (
	ErrNoSignature      = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp     = errors.New("webhook: timestamp outside the tolerance")
	ErrSignatureInvalid = errors.New("webhook: no signature matches")
)

// GenerateSecret returns a fresh "whsec_<base64>" secret.
func GenerateSecret() string {
	b := make([]byte, genSecretBytes)
	rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret returns the key of a "whsec_<base64>" secret: per the spec
// the HMAC key is the base64-decoded part, not the text.
func ParseSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New(`must start with "whsec_" followed by base64`)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		if key, err = base64.RawStdEncoding.DecodeString(enc); err != nil {
			return nil, errors.New(`the part after "whsec_" is not valid base64`)
		}
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf("must decode to %d to %d bytes, not %d", minSecretBytes, maxSecretBytes, len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header value for a message: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, space-separated
// (several while a rotated secret is in its grace period).
func Sign(keys [][]byte, id string, ts int64, body []byte) string {
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.WriteString(base64.StdEncoding.EncodeToString(mac(k, id, ts, body)))
	}
	return sb.String()
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received webhook as a receiver should: the timestamp is
// within tolerance of now and at least one v1 signature matches secret.
// It is what the README's receiver example does.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := ParseSecret(secret)
	if err != nil {
		return fmt.Errorf("webhook: secret %w", err)
	}
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrNoSignature
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return ErrBadTimestamp
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrBadTimestamp
	}
	want := mac(key, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		v, enc, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignatureInvalid
}
