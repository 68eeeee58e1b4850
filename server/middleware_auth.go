package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// Authenticator turns a request's token into an auth.Principal.
type Authenticator struct {
	verifier    *auth.Verifier // nil: authentication is off
	metricsAuth bool
	log         *slog.Logger
}

// newAuthenticator builds the configured authentication. ctx bounds the
// JWKS refresh.
func newAuthenticator(ctx context.Context, cfg *Config, log *slog.Logger) (*Authenticator, error) {
	a := &Authenticator{metricsAuth: cfg.MetricsAuth, log: log}
	if cfg.InsecureNoAuth {
		log.Warn("AUTHENTICATION IS OFF (--insecure-no-auth): anyone who can reach this port can read every stream and use the admin API. Use it for a local demo only.")
		return a, nil
	}
	opts := []auth.Option{auth.WithLeeway(cfg.JWTLeeway), auth.WithLogger(log), auth.WithCache(cfg.JWTCacheSize, cfg.JWTCacheTTL)}
	for _, s := range cfg.JWTSecrets {
		opts = append(opts, auth.WithHMACSecrets([]byte(s)))
	}
	if cfg.JWKSURL != "" {
		opts = append(opts, auth.WithJWKSURL(cfg.JWKSURL), auth.WithJWKSRefresh(cfg.JWKSRefresh, jwksUnknownKID))
	}
	if cfg.JWTAudience != "" {
		opts = append(opts, auth.WithAudience(cfg.JWTAudience))
	}
	if cfg.JWTIssuer != "" {
		opts = append(opts, auth.WithIssuer(cfg.JWTIssuer))
	}
	v, err := auth.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	a.verifier = v
	log.Info("authentication on", "hs256_secrets", len(cfg.JWTSecrets), "jwks", cfg.JWKSURL != "", "audience", cfg.JWTAudience, "issuer", cfg.JWTIssuer)
	return a, nil
}

// jwksUnknownKID bounds how often a token with an unknown kid may make the
// gateway fetch the JWKS early.
const jwksUnknownKID = 30 * time.Second

// needsAuth reports whether path is protected: the API under /v1/, and
// /metrics when --metrics-auth is set. Health checks, the dashboard's
// static files and /openapi.yaml are public: they reveal no data.
func (a *Authenticator) needsAuth(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/v1" || (a.metricsAuth && path == "/metrics")
}

// middleware authenticates protected requests and puts the principal in
// the request context. Refusals are 401 with WWW-Authenticate (RFC 6750).
func (a *Authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.needsAuth(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := a.authenticate(r)
		if err != nil {
			var ae *auth.Error
			if !errors.As(err, &ae) {
				ae = &auth.Error{Reason: auth.ReasonUnverifiable, Err: err}
			}
			metrics.AuthFailure(ae.Reason)
			a.log.Debug("token refused", "path", r.URL.Path, "reason", ae.Reason, "err", err)
			challenge := `Bearer realm="vstream-gateway"`
			if ae.Reason != auth.ReasonMissing {
				challenge += `, error="invalid_token", error_description="` + ae.Message() + `"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			handlers.WriteError(w, nil, &handlers.Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: ae.Message()})
			return
		}
		if r.URL.Path == "/metrics" && !p.Admin() && !p.HasScope(auth.ScopeMetrics) {
			forbid(w, "the token needs the admin or metrics scope for /metrics")
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.NewContext(r.Context(), p)))
	})
}

func (a *Authenticator) authenticate(r *http.Request) (*auth.Principal, error) {
	if a.verifier == nil {
		return auth.Anonymous(remoteHost(r)), nil
	}
	tok, _, err := auth.TokenFromRequest(r)
	if err != nil {
		return nil, err
	}
	return a.verifier.Verify(r.Context(), tok)
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// principal returns the request's principal. Routes behind the middleware
// always have one; a missing one is refused rather than allowed.
func principal(r *http.Request) *auth.Principal {
	return auth.FromContext(r.Context())
}

// forbid writes a 403 (RFC 6750 insufficient_scope).
func forbid(w http.ResponseWriter, msg string) {
	metrics.Refused("forbidden")
	w.Header().Set("WWW-Authenticate", `Bearer realm="vstream-gateway", error="insufficient_scope"`)
	handlers.WriteError(w, nil, &handlers.Error{Status: http.StatusForbidden, Code: "forbidden", Message: msg})
}

// requireAdmin guards the admin API: creating and deleting streams,
// deleting subscribers (and webhooks).
func requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := principal(r); p == nil || !p.Admin() {
			forbid(w, "this endpoint needs the admin scope")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// streamScope lets a request on /v1/streams/{stream}/… through when the
// token's streams claim covers the stream; admin tokens may manage any
// stream's definition and subscribers, but reading its data (see
// readScope) still needs the claim.
func streamScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principal(r)
		name := chi.URLParam(r, "stream")
		if p == nil || !(p.Admin() || p.MayReadStream(name)) {
			forbid(w, "the token's streams claim does not cover stream "+quoteName(name))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readScope guards the data transports: the stream must be in the token's
// streams claim, and a subscriber named in the query must be the token's.
func readScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principal(r)
		name := chi.URLParam(r, "stream")
		if p == nil || !p.MayReadStream(name) {
			forbid(w, "the token's streams claim does not cover stream "+quoteName(name))
			return
		}
		if sub := r.URL.Query().Get("subscriber"); sub != "" && !p.MayUseSubscriber(sub) {
			forbid(w, subscriberRule(p, sub))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownSubscriber guards /subscribers/{subscriber}: a token may read and ack
// only subscribers bound to its subject (admin: any).
func ownSubscriber(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principal(r)
		sub := chi.URLParam(r, "subscriber")
		if p == nil || !p.MayUseSubscriber(sub) {
			forbid(w, subscriberRule(p, sub))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func subscriberRule(p *auth.Principal, sub string) string {
	if p == nil {
		return "no principal"
	}
	return "subscriber " + quoteName(sub) + " is not bound to this token: use " + quoteName(p.Subject) + " or names starting with " + quoteName(p.Subject+".")
}

// quoteName quotes a name from the URL for a message, cut to a sane size.
func quoteName(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
