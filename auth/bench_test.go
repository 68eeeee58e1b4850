package auth

import (
	"context"
	"fmt"
	"testing"
	"time"
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

// BenchmarkVerifiedCache is the cost of the verified-token cache itself: a
// hit, and a put into a full cache (a client population larger than
// --jwt-cache-size, each with its own token).
func BenchmarkVerifiedCache(b *testing.B) {
	const size = 4096
	p := &Principal{Subject: "a", Expires: time.Now().Add(time.Hour)}
	tokens := make([]string, 4*size)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("token-%d", i)
	}
	b.Run("hit", func(b *testing.B) {
		c := newVerifiedCache(size, time.Hour, time.Now)
		c.put(tokens[0], p, "")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := c.get(tokens[0]); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("put-full", func(b *testing.B) {
		c := newVerifiedCache(size, time.Hour, time.Now)
		for _, t := range tokens[:size] {
			c.put(t, p, "")
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c.put(tokens[i%len(tokens)], p, "")
			i++
		}
	})
}
