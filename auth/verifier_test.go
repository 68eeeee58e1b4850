package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	secretA = []byte("0123456789abcdef0123456789abcdef-a")
	secretB = []byte("0123456789abcdef0123456789abcdef-b")
)

func mustVerifier(t testing.TB, opts ...Option) *Verifier {
	t.Helper()
	// The test's context ends the JWKS refresh goroutine with the test.
	v, err := New(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVerifyMatrix runs forged, expired, misdirected and wrong-algorithm
// tokens through a verifier that accepts both HS256 and a JWKS, and checks
// each is refused for the right reason.
func TestVerifyMatrix(t *testing.T) {
	rsaKey, ecKey, edKey := newRSA(t, "rsa-1"), newEC(t, "ec-1"), newEd(t, "ed-1")
	unpublished := newRSA(t, "rsa-1") // same kid, different key: a forgery
	jwks := newJWKSServer(t, rsaKey, ecKey, edKey)
	v := mustVerifier(t,
		WithHMACSecrets(secretA, secretB),
		WithJWKSURL(jwks.URL),
		WithAudience("vsg"),
		WithIssuer("https://idp.test"),
		WithLeeway(5*time.Second),
	)
	good := func() *Claims {
		c := claims("alice")
		c.Audience = jwt.ClaimStrings{"vsg"}
		c.Issuer = "https://idp.test"
		return c
	}
	with := func(f func(c *Claims)) *Claims { c := good(); f(c); return c }
	pubPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(rsaKey.pub)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	past := time.Now().Add(-time.Hour)

	cases := []struct {
		name   string
		token  string
		reason string // "" accepts
	}{
		{"HS256, first secret", hs256(t, secretA, good()), ""},
		{"HS256, rotated secret", hs256(t, secretB, good()), ""},
		{"RS256 from JWKS", rsaKey.sign(t, good()), ""},
		{"ES256 from JWKS", ecKey.sign(t, good()), ""},
		{"EdDSA from JWKS", edKey.sign(t, good()), ""},
		{"expired within leeway", hs256(t, secretA, with(func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-2 * time.Second)) })), ""},
		{"audience among several", hs256(t, secretA, with(func(c *Claims) { c.Audience = jwt.ClaimStrings{"other", "vsg"} })), ""},

		{"empty", "", ReasonMissing},
		{"garbage", "not-a-jwt", ReasonMalformed},
		{"three dots of garbage", "a.b.c", ReasonMalformed},
		{"forged HS256 (unknown secret)", hs256(t, []byte("another-secret-another-secret-0123"), good()), ReasonSignature},
		{"forged RS256 (unpublished key, known kid)", unpublished.sign(t, good()), ReasonSignature},
		{"tampered payload", tamper(t, hs256(t, secretA, good())), ReasonSignature},
		{"expired", hs256(t, secretA, with(func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(past) })), ReasonExpired},
		{"forged and expired", hs256(t, []byte("another-secret-another-secret-0123"), with(func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(past) })), ReasonSignature},
		{"no exp", hs256(t, secretA, with(func(c *Claims) { c.ExpiresAt = nil })), ReasonClaims},
		{"not before in the future", hs256(t, secretA, with(func(c *Claims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) })), ReasonNotYetValid},
		{"issued in the future", hs256(t, secretA, with(func(c *Claims) { c.IssuedAt = jwt.NewNumericDate(time.Now().Add(time.Hour)) })), ReasonNotYetValid},
		{"wrong audience", hs256(t, secretA, with(func(c *Claims) { c.Audience = jwt.ClaimStrings{"someone-else"} })), ReasonAudience},
		{"no audience", hs256(t, secretA, with(func(c *Claims) { c.Audience = nil })), ReasonClaims},
		{"wrong issuer", hs256(t, secretA, with(func(c *Claims) { c.Issuer = "https://evil.test" })), ReasonIssuer},
		{"alg none", none(t, good()), ReasonAlgorithm},
		{"alg HS384 (not accepted)", sign(t, jwt.SigningMethodHS384, secretA, good()), ReasonAlgorithm},
		{"HS/RS confusion: HS256 keyed with the RSA public key", hs256(t, pubPEM, good()), ReasonSignature},
		{"unknown alg", withHeader(t, hs256(t, secretA, good()), `{"alg":"XX999","typ":"JWT"}`), ReasonAlgorithm},
		{"unknown kid", newRSA(t, "rsa-unknown").sign(t, good()), ReasonUnknownKey},
		{"no sub", hs256(t, secretA, with(func(c *Claims) { c.Subject = "" })), ReasonClaims},
		{"empty glob", hs256(t, secretA, with(func(c *Claims) { c.Tables = []string{""} })), ReasonClaims},
	}
	for _, c := range cases {
		p, err := v.Verify(context.Background(), c.token)
		if c.reason == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			} else if p.Subject != "alice" || !p.MayReadStream("orders-eu") || p.MayReadStream("customers") {
				t.Errorf("%s: principal %+v", c.name, p)
			}
			continue
		}
		var ae *Error
		if !errors.As(err, &ae) {
			t.Errorf("%s: accepted or untyped error: %v", c.name, err)
			continue
		}
		if ae.Reason != c.reason {
			t.Errorf("%s: reason %s (%v), want %s", c.name, ae.Reason, err, c.reason)
		}
		wantClass := ErrInvalidToken
		if c.reason == ReasonMissing {
			wantClass = ErrNoToken
		}
		if !errors.Is(err, wantClass) || ae.Message() == "" {
			t.Errorf("%s: %v is not %v or has no message", c.name, err, wantClass)
		}
	}
}

// TestAlgorithmFamilies: a key source answers only for its own algorithm
// family, so a verifier with only a secret refuses RS256 and the reverse.
func TestAlgorithmFamilies(t *testing.T) {
	rsaKey := newRSA(t, "k1")
	jwks := newJWKSServer(t, rsaKey)
	onlyHS := mustVerifier(t, WithHMACSecrets(secretA))
	onlyJWKS := mustVerifier(t, WithJWKSURL(jwks.URL))
	if _, err := onlyHS.Verify(context.Background(), rsaKey.sign(t, claims("a"))); reason(err) != ReasonAlgorithm {
		t.Errorf("RS256 on an HS-only verifier: %v", err)
	}
	if _, err := onlyJWKS.Verify(context.Background(), hs256(t, secretA, claims("a"))); reason(err) != ReasonAlgorithm {
		t.Errorf("HS256 on a JWKS-only verifier: %v", err)
	}
	if _, err := onlyJWKS.Verify(context.Background(), rsaKey.sign(t, claims("a"))); err != nil {
		t.Errorf("RS256 on a JWKS verifier: %v", err)
	}
}

// TestJWKSRotation: a token signed by a key published after start-up is
// accepted once the set is fetched again (unknown kid triggers a fetch),
// and a key withdrawn from the set stops working after the next fetch.
func TestJWKSRotation(t *testing.T) {
	k1, k2 := newRSA(t, "2026-01"), newEC(t, "2026-02")
	jwks := newJWKSServer(t, k1)
	v := mustVerifier(t, WithJWKSURL(jwks.URL), WithJWKSRefresh(time.Hour, time.Nanosecond))
	ctx := context.Background()
	if _, err := v.Verify(ctx, k1.sign(t, claims("a"))); err != nil {
		t.Fatalf("k1 before rotation: %v", err)
	}
	jwks.publish(k1, k2)
	if _, err := v.Verify(ctx, k2.sign(t, claims("a"))); err != nil {
		t.Fatalf("k2 after it was published: %v", err)
	}
	jwks.publish(k2)
	// k1's kid is still cached until the next refresh; a token with an
	// unknown kid refreshes the set, after which k1 is gone.
	v.Verify(ctx, newRSA(t, "nobody").sign(t, claims("a")))
	if _, err := v.Verify(ctx, k1.sign(t, claims("a"))); reason(err) != ReasonUnknownKey {
		t.Errorf("k1 after withdrawal: %v, want unknown_key", err)
	}
	if _, err := v.Verify(ctx, k2.sign(t, claims("a"))); err != nil {
		t.Errorf("k2 after k1 withdrawal: %v", err)
	}
}

// TestJWKSUnknownKIDRateLimited: made-up kids cannot make the gateway
// fetch the JWKS on every request.
func TestJWKSUnknownKIDRateLimited(t *testing.T) {
	k1 := newRSA(t, "k1")
	jwks := newJWKSServer(t, k1)
	v := mustVerifier(t, WithJWKSURL(jwks.URL), WithJWKSRefresh(time.Hour, time.Hour))
	before := jwks.fetches.Load()
	for i := 0; i < 20; i++ {
		v.Verify(context.Background(), newRSA(t, "made-up").sign(t, claims("a")))
	}
	if n := jwks.fetches.Load() - before; n > 1 {
		t.Errorf("%d JWKS fetches for 20 unknown kids, want at most 1", n)
	}
}

// TestJWKSDown: the gateway starts while the JWKS is unreachable; tokens
// are refused as unverifiable (not accepted) until it answers.
func TestJWKSDown(t *testing.T) {
	jwks := newJWKSServer(t)
	url := jwks.URL
	jwks.Close()
	v, err := New(t.Context(), WithJWKSURL(url), WithHTTPClient(&http.Client{Timeout: time.Second}))
	if err != nil {
		t.Fatalf("start with JWKS down: %v", err)
	}
	_, err = v.Verify(context.Background(), newRSA(t, "k").sign(t, claims("a")))
	if err == nil || !errors.Is(err, ErrInvalidToken) {
		t.Errorf("token accepted with no keys: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, opts := range map[string][]Option{
		"nothing":      nil,
		"short secret": {WithHMACSecrets([]byte("short"))},
	} {
		if _, err := New(context.Background(), opts...); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

func TestMintHS256(t *testing.T) {
	tok, err := MintHS256(secretA, Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "demo"}, Streams: []string{"*"}, Tables: []string{"*"}, Scope: "admin"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := mustVerifier(t, WithHMACSecrets(secretA)).Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Admin() || !p.MayReadStream("anything") || !p.TableFilter().AllowsAll() || time.Until(p.Expires) < 59*time.Minute {
		t.Errorf("minted principal %+v", p)
	}
	if _, err := MintHS256([]byte("short"), Claims{}, time.Hour); !errors.Is(err, ErrConfig) {
		t.Errorf("short secret: %v", err)
	}
}

func reason(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}

func sign(t testing.TB, m jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func none(t testing.TB, c jwt.Claims) string {
	return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, c)
}

// tamper flips the payload's subject while keeping the signature.
func tamper(t testing.TB, tok string) string {
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	payload = []byte(strings.Replace(string(payload), `"orders-*"`, `"*"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func withHeader(t testing.TB, tok, header string) string {
	parts := strings.Split(tok, ".")
	parts[0] = base64.RawURLEncoding.EncodeToString([]byte(header))
	return strings.Join(parts, ".")
}
