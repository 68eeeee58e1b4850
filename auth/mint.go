package auth

import (
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MintHS256 signs an HS256 token for sub with the given scopes, valid for
// ttl. It backs `vstream-gateway token` (the demo's ready token) and tests;
// production tokens come from the identity provider.
func MintHS256(secret []byte, c Claims, ttl time.Duration) (string, error) {
	if len(secret) < minSecretLen {
		return "", fmt.Errorf("%w: the secret must be at least %d bytes", ErrConfig, minSecretLen)
	}
	if c.Subject == "" {
		return "", fmt.Errorf("%w: sub is required", ErrConfig)
	}
	now := time.Now()
	if c.IssuedAt == nil {
		c.IssuedAt = jwt.NewNumericDate(now)
	}
	if c.ExpiresAt == nil {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, &c).SignedString(secret)
}
