package auth

import (
	"context"
	"testing"
)

// BenchmarkVerify is the per-request cost of checking a token, by
// algorithm (JWKS keys cached, as in steady state).
func BenchmarkVerify(b *testing.B) {
	rsaKey, ecKey, edKey := newRSA(b, "rsa"), newEC(b, "ec"), newEd(b, "ed")
	jwks := newJWKSServer(b, rsaKey, ecKey, edKey)
	v := mustVerifier(b, WithHMACSecrets(secretA), WithJWKSURL(jwks.URL))
	for _, c := range []struct{ name, token string }{
		{"HS256", hs256(b, secretA, claims("a"))},
		{"RS256", rsaKey.sign(b, claims("a"))},
		{"ES256", ecKey.sign(b, claims("a"))},
		{"EdDSA", edKey.sign(b, claims("a"))},
	} {
		if _, err := v.Verify(context.Background(), c.token); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := v.Verify(context.Background(), c.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
