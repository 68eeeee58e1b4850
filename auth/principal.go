// Package auth verifies the JWTs clients present and turns their claims
// into a Principal: which streams it may read, which keyspace.table rows it
// may see, which subscriber names it may use, and whether it may use the
// admin API.
//
// Tokens are HS256 (one or more shared secrets, for rotation) and/or
// RS/PS/ES/EdDSA from a JWKS URL (cached, refreshed, looked up by kid).
// Claims:
//
//	sub     required; subscriber names are bound to it (see MayUseSubscriber)
//	exp     required
//	aud/iss checked when the gateway is configured with them
//	streams array of stream-name globs the token may read
//	tables  array of keyspace.table globs; rows of other tables are never sent
//	scope   space-separated; "admin" grants the admin API
package auth

import (
	"context"
	"strings"
	"time"
)

// ScopeAdmin grants the admin API (streams, webhooks, subscribers).
const ScopeAdmin = "admin"

// ScopeMetrics grants GET /metrics when it is not public.
const ScopeMetrics = "metrics"

// Principal is an authenticated caller.
type Principal struct {
	Subject string
	Streams []string // stream-name globs
	Tables  []string // keyspace.table globs
	Scopes  []string
	Expires time.Time
	// Anonymous is set when authentication is off (--insecure-no-auth):
	// everything is allowed and Subject names the remote host.
	Anonymous bool

	tables *TableFilter
}

// Anonymous returns the principal of a request when authentication is off.
// key distinguishes callers for connection limits (the remote host).
func Anonymous(key string) *Principal {
	return &Principal{
		Subject:   key,
		Streams:   []string{"*"},
		Tables:    []string{"*"},
		Scopes:    []string{ScopeAdmin, ScopeMetrics},
		Anonymous: true,
		tables:    allTables,
	}
}

// HasScope reports whether the token was granted scope s.
func (p *Principal) HasScope(s string) bool {
	for _, have := range p.Scopes {
		if have == s {
			return true
		}
	}
	return false
}

// Admin reports whether the principal may use the admin API.
func (p *Principal) Admin() bool { return p.HasScope(ScopeAdmin) }

// MayReadStream reports whether the "streams" claim covers stream. The
// admin scope does not widen it: reading data is always per stream.
func (p *Principal) MayReadStream(stream string) bool {
	for _, g := range p.Streams {
		if matchGlob(g, stream) {
			return true
		}
	}
	return false
}

// MayUseSubscriber reports whether the principal may read, ack or resume
// the named subscriber's cursor. Subscriber names are bound to the token's
// subject so one client can neither move nor read another's cursor: a
// non-admin token may use the name equal to its "sub" or names starting
// with "<sub>." (one client, several consumers). Admin tokens may use any.
func (p *Principal) MayUseSubscriber(name string) bool {
	if p.Admin() {
		return true
	}
	if p.Subject == "" {
		return false
	}
	return name == p.Subject || (strings.HasPrefix(name, p.Subject) && len(name) > len(p.Subject) && name[len(p.Subject)] == '.')
}

// TableFilter returns the filter built from the "tables" claim.
func (p *Principal) TableFilter() *TableFilter {
	if p.tables == nil {
		p.tables = NewTableFilter(p.Tables)
	}
	return p.tables
}

// Key identifies the caller for per-caller limits (connections, rates):
// the subject, so that refreshing a token does not reset a client's share.
func (p *Principal) Key() string {
	if p.Anonymous {
		return "anon:" + p.Subject
	}
	return "sub:" + p.Subject
}

type ctxKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal of the request, or nil when the
// authentication middleware did not run.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}
