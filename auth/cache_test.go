package auth

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestVerifiedTokenCache: a token that verified is remembered (the same
// principal comes back) until it expires, a tampered copy is still
// refused, the cache stays within its size, and it can be turned off.
func TestVerifiedTokenCache(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	v := mustVerifier(t, WithHMACSecrets(secretA), WithClock(clock), WithLeeway(0), WithCache(2, time.Hour))
	ctx := context.Background()
	c := claims("alice")
	c.IssuedAt = jwt.NewNumericDate(now.Add(-time.Minute))
	c.ExpiresAt = jwt.NewNumericDate(now.Add(2 * time.Minute))
	tok := hs256(t, secretA, c)

	p1, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := v.Verify(ctx, tok)
	if err != nil || p2 != p1 {
		t.Fatalf("second verification: %p %v, want the cached principal %p", p2, err, p1)
	}
	if _, err := v.Verify(ctx, tamper(t, tok)); reason(err) != ReasonSignature {
		t.Fatalf("tampered copy of a cached token: %v", err)
	}

	// Past its exp the token is refused, cached or not.
	now = now.Add(3 * time.Minute)
	if _, err := v.Verify(ctx, tok); reason(err) != ReasonExpired {
		t.Fatalf("cached token after its exp: %v, want expired", err)
	}

	// Bounded: more tokens than room.
	for i := range 5 {
		c := claims(fmt.Sprint("user", i))
		c.IssuedAt = jwt.NewNumericDate(now.Add(-time.Minute))
		c.ExpiresAt = jwt.NewNumericDate(now.Add(time.Hour))
		if _, err := v.Verify(ctx, hs256(t, secretA, c)); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.cache.entries.Len(); n > 2 {
		t.Fatalf("%d cached tokens, limit 2", n)
	}

	off := mustVerifier(t, WithHMACSecrets(secretA), WithClock(clock), WithCache(0, 0))
	c = claims("bob")
	c.IssuedAt = jwt.NewNumericDate(now.Add(-time.Minute))
	c.ExpiresAt = jwt.NewNumericDate(now.Add(time.Hour))
	tok = hs256(t, secretA, c)
	a, _ := off.Verify(ctx, tok)
	b, _ := off.Verify(ctx, tok)
	if a == nil || a == b {
		t.Fatal("with the cache off, every verification builds its principal")
	}
}

// TestCachedJWKSTokenLosesItsKey: a cached token signed by a JWKS key is
// refused once the key has left the set, as without the cache.
func TestCachedJWKSTokenLosesItsKey(t *testing.T) {
	k1, k2 := newRSA(t, "k1"), newRSA(t, "k2")
	jwks := newJWKSServer(t, k1, k2)
	v := mustVerifier(t, WithJWKSURL(jwks.URL), WithJWKSRefresh(time.Hour, time.Nanosecond))
	ctx := context.Background()
	tok := k1.sign(t, claims("a"))
	p1, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := v.Verify(ctx, tok); err != nil || p2 != p1 {
		t.Fatalf("not served from the cache: %v", err)
	}
	jwks.publish(k2)
	v.Verify(ctx, newRSA(t, "nobody").sign(t, claims("a"))) // an unknown kid refreshes the set
	if _, err := v.Verify(ctx, tok); reason(err) != ReasonUnknownKey {
		t.Fatalf("cached token after its key was withdrawn: %v, want unknown_key", err)
	}
}

// TestVerifiedCacheEviction: a full cache evicts the least recently used
// token, and an entry is refused past its own deadline (ttl or exp,
// whichever is sooner, on the verifier's clock) even while the LRU still
// holds it.
func TestVerifiedCacheEviction(t *testing.T) {
	now := time.Now()
	c := newVerifiedCache(2, time.Second, func() time.Time { return now })
	p := &Principal{Subject: "a", Expires: now.Add(time.Hour)}
	c.put("a", p, "")
	c.put("b", p, "")
	if _, ok := c.get("a"); !ok {
		t.Fatal("a: miss")
	}
	c.put("c", p, "")
	if _, ok := c.get("b"); ok {
		t.Error("b, the least recently used, was kept")
	}
	if _, ok := c.get("a"); !ok {
		t.Error("a, recently used, was evicted")
	}

	now = now.Add(2 * time.Second) // past the 1s ttl, before exp
	if _, ok := c.get("a"); ok {
		t.Error("a served past its ttl")
	}
	short := &Principal{Subject: "s", Expires: now.Add(100 * time.Millisecond)}
	c.put("s", short, "")
	now = now.Add(200 * time.Millisecond) // past exp, before ttl
	if _, ok := c.get("s"); ok {
		t.Error("s served past its exp")
	}
	c.put("gone", &Principal{Subject: "g", Expires: now}, "")
	if _, ok := c.get("gone"); ok {
		t.Error("an expired token was cached")
	}
}
