package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// Claims are the JWT claims the gateway reads.
type Claims struct {
	jwt.RegisteredClaims
	Streams []string `json:"streams,omitempty"`
	Tables  []string `json:"tables,omitempty"`
	Scope   string   `json:"scope,omitempty"`
}

// minSecretLen is the shortest HS256 secret accepted: RFC 7518 §3.2 asks
// for a key at least as long as the hash output (256 bits).
const minSecretLen = 32

// hmacAlgs and asymmetricAlgs are the algorithms accepted per key source.
// A token's "alg" selects the source, and a source is consulted only for
// its own family: an RS256 public key is never tried as an HMAC secret
// (HS/RS confusion), and "none" has no source at all.
var (
	hmacAlgs       = map[string]bool{"HS256": true}
	asymmetricAlgs = map[string]bool{
		"RS256": true, "RS384": true, "RS512": true,
		"PS256": true, "PS384": true, "PS512": true,
		"ES256": true, "ES384": true, "ES512": true,
		"EdDSA": true,
	}
)

// Verifier checks tokens.
type Verifier struct {
	secrets jwt.VerificationKeySet
	jwks    keyfunc.Keyfunc
	parser  *jwt.Parser
	cache   *verifiedCache // nil: every token is verified every time
}

type config struct {
	secrets     [][]byte
	jwksURL     string
	jwks        keyfunc.Keyfunc
	audience    string
	issuer      string
	leeway      time.Duration
	now         func() time.Time
	refresh     time.Duration
	unknownKID  time.Duration
	httpClient  *http.Client
	httpTimeout time.Duration
	log         *slog.Logger
	cacheSize   int
	cacheTTL    time.Duration
}

// Option configures a Verifier.
type Option func(*config)

// WithHMACSecrets accepts HS256 tokens signed with any of secrets; more
// than one lets a secret be rotated without refusing live tokens.
func WithHMACSecrets(secrets ...[]byte) Option {
	return func(c *config) { c.secrets = append(c.secrets, secrets...) }
}

// WithJWKSURL accepts asymmetric tokens whose kid is in the JWK set at url.
func WithJWKSURL(url string) Option { return func(c *config) { c.jwksURL = url } }

// WithKeyfunc uses an already built JWK set (tests, embedded keys).
func WithKeyfunc(k keyfunc.Keyfunc) Option { return func(c *config) { c.jwks = k } }

// WithAudience requires "aud" to contain aud.
func WithAudience(aud string) Option { return func(c *config) { c.audience = aud } }

// WithIssuer requires "iss" to equal iss.
func WithIssuer(iss string) Option { return func(c *config) { c.issuer = iss } }

// WithLeeway tolerates clock skew on exp, nbf and iat (default 30s).
func WithLeeway(d time.Duration) Option { return func(c *config) { c.leeway = d } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithJWKSRefresh sets how often the JWK set is fetched again (default 1h)
// and how often an unknown kid may trigger an early fetch (default 30s):
// the second is what makes a key rotation take effect at once, bounded so
// that tokens with made-up kids cannot hammer the identity provider.
func WithJWKSRefresh(interval, unknownKID time.Duration) Option {
	return func(c *config) { c.refresh, c.unknownKID = interval, unknownKID }
}

// WithCache sets how many verified tokens are remembered and for how long
// at most (default 4096 for 1 minute); size 0 turns the cache off.
func WithCache(size int, ttl time.Duration) Option {
	return func(c *config) { c.cacheSize, c.cacheTTL = size, ttl }
}

// WithLogger sets where JWKS refresh failures are logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithHTTPClient sets the client that fetches the JWK set.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.httpClient = hc } }

// New returns a verifier. ctx bounds the JWKS refresh goroutine. At least
// one key source (secrets or a JWKS) is required.
func New(ctx context.Context, opts ...Option) (*Verifier, error) {
	c := config{leeway: 30 * time.Second, now: time.Now, refresh: time.Hour, unknownKID: 30 * time.Second, httpTimeout: 10 * time.Second, log: slog.Default(),
		cacheSize: 4096, cacheTTL: time.Minute}
	for _, o := range opts {
		o(&c)
	}
	v := &Verifier{}
	for i, s := range c.secrets {
		if len(s) < minSecretLen {
			return nil, fmt.Errorf("%w: HS256 secret %d is %d bytes, at least %d are required", ErrConfig, i+1, len(s), minSecretLen)
		}
		v.secrets.Keys = append(v.secrets.Keys, s)
	}
	v.jwks = c.jwks
	if c.jwksURL != "" && v.jwks == nil {
		k, err := newJWKS(ctx, c)
		if err != nil {
			return nil, err
		}
		v.jwks = k
	}
	if len(v.secrets.Keys) == 0 && v.jwks == nil {
		return nil, fmt.Errorf("%w: no HS256 secret and no JWKS URL", ErrConfig)
	}
	popts := []jwt.ParserOption{
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(c.leeway),
		jwt.WithTimeFunc(c.now),
	}
	if c.audience != "" {
		popts = append(popts, jwt.WithAudience(c.audience))
	}
	if c.issuer != "" {
		popts = append(popts, jwt.WithIssuer(c.issuer))
	}
	v.parser = jwt.NewParser(popts...)
	if c.cacheSize > 0 && c.cacheTTL > 0 {
		v.cache = newVerifiedCache(c.cacheSize, c.cacheTTL, c.now)
	}
	return v, nil
}

func newJWKS(ctx context.Context, c config) (keyfunc.Keyfunc, error) {
	// The gateway must come up even while the identity provider is down:
	// the first fetch failing is logged by the library and retried on the
	// refresh schedule, and tokens fail as unverifiable meanwhile.
	noErr := true
	over := keyfunc.Override{
		Client:                    c.httpClient,
		HTTPTimeout:               c.httpTimeout,
		NoErrorReturnFirstHTTPReq: &noErr,
		RefreshInterval:           c.refresh,
		RefreshUnknownKID:         newUnknownKIDLimiter(c.unknownKID),
		// The library uses this one deadline for waiting on the
		// unknown-kid limiter and for the fetch that follows, so it must
		// leave the fetch its time (a millisecond here made a new key
		// unusable until the hourly refresh). rate.Limiter.Wait fails at
		// once when the limiter would hold a request past the deadline, so
		// a request still never sits out a whole limiter period.
		RateLimitWaitMax: c.httpTimeout,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				c.log.Warn("JWKS refresh failed; keeping the keys already fetched", "url", u, "err", err)
			}
		},
	}
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{c.jwksURL}, over)
	if err != nil {
		return nil, fmt.Errorf("%w: JWKS %s: %v", ErrConfig, c.jwksURL, err)
	}
	return k, nil
}

// Verify checks raw and returns its principal, or an *Error.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Principal, error) {
	if raw == "" {
		return nil, &Error{Reason: ReasonMissing, Err: ErrNoToken}
	}
	if v.cache != nil {
		if e, ok := v.cache.get(raw); ok {
			if e.kid == "" {
				return e.p, nil
			}
			if _, err := v.jwks.Storage().KeyRead(ctx, e.kid); err == nil {
				return e.p, nil
			}
			v.cache.drop(raw) // the key left the set: verify again, and fail
		}
	}
	claims := &Claims{}
	tok, err := v.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		alg := t.Method.Alg()
		switch {
		case hmacAlgs[alg] && len(v.secrets.Keys) > 0:
			return v.secrets, nil
		case asymmetricAlgs[alg] && v.jwks != nil:
			return v.jwks.KeyfuncCtx(ctx)(t)
		default:
			return nil, fmt.Errorf("%w: %q", ErrAlgorithm, alg)
		}
	})
	if err != nil {
		return nil, &Error{Reason: classify(err), Err: err}
	}
	p, err := principal(claims)
	if err != nil {
		return nil, &Error{Reason: ReasonClaims, Err: err}
	}
	if v.cache != nil {
		kid := ""
		if asymmetricAlgs[tok.Method.Alg()] {
			kid, _ = tok.Header["kid"].(string)
			if kid == "" || v.jwks.Storage() == nil {
				return p, nil // no key to re-check on a hit: not cached
			}
		}
		v.cache.put(raw, p, kid)
	}
	return p, nil
}

// classify maps a jwt/keyfunc error to a reason. Signature checks come
// before claim checks in jwt v5, so a forged expired token is a signature
// failure, not an expiry.
func classify(err error) string {
	switch {
	case errors.Is(err, ErrAlgorithm):
		return ReasonAlgorithm
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return ReasonUnknownKey
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ReasonMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return ReasonSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return ReasonExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return ReasonNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ReasonAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return ReasonIssuer
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidClaims):
		return ReasonClaims
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// An alg the library does not know ends here before our keyfunc.
		if strings.Contains(err.Error(), "signing method") {
			return ReasonAlgorithm
		}
		return ReasonUnverifiable
	default:
		return ReasonUnverifiable
	}
}

// maxGlobs bounds the claims a token may carry: each event is matched
// against the table globs, so their number is a per-event cost.
const maxGlobs = 256

func principal(c *Claims) (*Principal, error) {
	if c.Subject == "" {
		return nil, &claimError{"sub is required"}
	}
	for _, list := range [][]string{c.Streams, c.Tables} {
		if len(list) > maxGlobs {
			return nil, &claimError{fmt.Sprintf("at most %d globs per claim", maxGlobs)}
		}
		for _, g := range list {
			if g == "" || len(g) > 256 {
				return nil, &claimError{"globs must be 1-256 characters"}
			}
		}
	}
	p := &Principal{
		Subject: c.Subject,
		Streams: c.Streams,
		Tables:  c.Tables,
		Scopes:  strings.Fields(c.Scope),
	}
	if c.ExpiresAt != nil {
		p.Expires = c.ExpiresAt.Time
	}
	p.tables = NewTableFilter(p.Tables)
	return p, nil
}
