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

	mu  sync.Mutex
	tok string
	exp time.Time // zero: unknown (not a JWT, or no exp)
}

// refreshAhead is how long before its exp a token is replaced: a
// connection opened with a token that expires at once is closed at once.
const refreshAhead = 30 * time.Second

// get returns the token to present; fresh asks the source for a new one
// whatever the cached one's exp.
func (t *tokens) get(ctx context.Context, fresh bool) (string, error) {
	if t.src == nil {
		return "", nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != "" && !fresh && (t.exp.IsZero() || time.Until(t.exp) > refreshAhead) {
		return t.tok, nil
	}
	tok, err := t.src(ctx)
	if err != nil {
		return "", fmt.Errorf("token source: %w", err)
	}
	t.tok, t.exp = tok, jwtExp(tok)
	return tok, nil
}

// expiry is the cached token's exp (zero: unknown).
func (t *tokens) expiry() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exp
}

// jwtExp reads a JWT's exp without verifying the token: it is only used
// to replace the token before the gateway refuses it.
func jwtExp(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(b, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(claims.Exp), 0)
}
