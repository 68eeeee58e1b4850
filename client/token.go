package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// tokens caches the TokenSource's token and asks it again when the token
// is about to expire or was refused.
type tokens struct {
	src TokenSource // nil: no token

	mu    sync.Mutex
	tok   string
	exp   time.Time     // zero: unknown (not a JWT, or no exp)
	ahead time.Duration // how long before exp the token is replaced
}

// refreshAhead is how long before its exp a token is replaced: a fifth of
// its lifetime (exp - iat), at most 30 s (30 s when the token has no
// iat). A connection opened with a token about to expire is closed soon.
const refreshAhead = 30 * time.Second

// get returns the token to present; fresh asks the source for a new one
// whatever the cached one's exp.
func (t *tokens) get(ctx context.Context, fresh bool) (string, error) {
	if t.src == nil {
		return "", nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != "" && !fresh && (t.exp.IsZero() || time.Until(t.exp) > t.ahead) {
		return t.tok, nil
	}
	tok, err := t.src(ctx)
	if err != nil {
		return "", fmt.Errorf("token source: %w", err)
	}
	t.tok = tok
	var iat time.Time
	t.exp, iat = jwtTimes(tok)
	t.ahead = refreshAhead
	if !iat.IsZero() && t.exp.After(iat) {
		t.ahead = min(refreshAhead, t.exp.Sub(iat)/5)
	}
	return tok, nil
}

// expiry is the cached token's exp (zero: unknown), and how long before
// it the token is replaced.
func (t *tokens) expiry() (time.Time, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exp, t.ahead
}

// jwtTimes reads a JWT's exp and iat without verifying the token: they
// are only used to replace the token before the gateway refuses it.
func jwtTimes(token string) (exp, iat time.Time) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return
	}
	var claims struct {
		Exp, Iat float64
	}
	if json.Unmarshal(b, &claims) != nil || claims.Exp <= 0 {
		return
	}
	exp = time.Unix(int64(claims.Exp), 0)
	if claims.Iat > 0 {
		iat = time.Unix(int64(claims.Iat), 0)
	}
	return exp, iat
}
