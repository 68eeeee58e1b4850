package webhook

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The test vector of the Standard Webhooks specification.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func specHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, specID)
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, sig)
	return h
}

func TestSignSpecVector(t *testing.T) {
	key, err := ParseSecret(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := Sign([][]byte{key}, specID, specTimestamp, []byte(specBody)); got != specSignature {
		t.Fatalf("signature %q, want %q", got, specSignature)
	}
	at := time.Unix(specTimestamp, 0)
	if err := Verify(specSecret, specHeaders(specSignature), []byte(specBody), at, DefaultTolerance); err != nil {
		t.Fatalf("spec vector does not verify: %v", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	at := time.Unix(specTimestamp, 0)
	body := []byte(specBody)
	cases := []struct {
		name string
		h    http.Header
		body []byte
		now  time.Time
		want error
	}{
		{"tampered body", specHeaders(specSignature), []byte(`{"test": 2432232315}`), at, ErrSignatureInvalid},
		{"other id", func() http.Header { h := specHeaders(specSignature); h.Set(HeaderID, "msg_other"); return h }(), body, at, ErrSignatureInvalid},
		{"too old", specHeaders(specSignature), body, at.Add(DefaultTolerance + time.Second), ErrBadTimestamp},
		{"from the future", specHeaders(specSignature), body, at.Add(-DefaultTolerance - time.Second), ErrBadTimestamp},
		{"unknown version", specHeaders("v2," + strings.TrimPrefix(specSignature, "v1,")), body, at, ErrSignatureInvalid},
		{"missing", http.Header{}, body, at, ErrNoSignature},
		{"garbage", specHeaders("v1,!!!"), body, at, ErrSignatureInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Verify(specSecret, c.h, c.body, c.now, DefaultTolerance); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// During a rotation every request carries one signature per secret; a
// receiver with either secret accepts it.
func TestSignRotation(t *testing.T) {
	next := GenerateSecret()
	w := &Webhook{Secrets: []StoredSecret{{Secret: next}, {Secret: specSecret, ExpiresAt: time.Unix(specTimestamp+60, 0)}}}
	now := time.Unix(specTimestamp, 0)
	sig := Sign(w.signingKeys(now), specID, specTimestamp, []byte(specBody))
	parts := strings.Fields(sig)
	if len(parts) != 2 || parts[1] != specSignature {
		t.Fatalf("signature header %q: want the new secret's and then %q", sig, specSignature)
	}
	for _, s := range []string{next, specSecret} {
		if err := Verify(s, specHeaders(sig), []byte(specBody), now, DefaultTolerance); err != nil {
			t.Fatalf("secret %s…: %v", s[:10], err)
		}
	}
	// After the grace period only the new secret signs.
	later := now.Add(time.Minute)
	if keys := w.signingKeys(later); len(keys) != 1 {
		t.Fatalf("%d keys after the grace period, want 1", len(keys))
	}
}

func TestParseSecret(t *testing.T) {
	for _, s := range []string{specSecret, GenerateSecret(), "whsec_" + strings.TrimRight(GenerateSecret()[6:], "=")} {
		if _, err := ParseSecret(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_!!!!", "whsec_c2hvcnQ=", "whsec_" + strings.Repeat("QUFB", 30)} {
		if _, err := ParseSecret(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if a, b := GenerateSecret(), GenerateSecret(); a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("generated %q and %q", a, b)
	}
}
