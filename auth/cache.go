package auth

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// verifiedCache remembers the principals of tokens that passed
// verification. Checking an ES256 signature costs ≈ 60 µs and RS256 ≈ 30 µs
// (`go test -bench ./auth/`), and a client polling the changes endpoint
// presents the same token on every request; a hit is a map lookup.
//
// Only exact token strings that verified are cached, so a forged or
// altered token never hits. An entry lives until the token expires or for
// ttl, whichever is sooner. A hit on a token signed by a JWKS key checks
// that the key is still in the set (a map lookup), so a key withdrawn from
// the JWKS stops working at the same refresh as without the cache.
//
// The LRU evicts the least recently used token when full, in constant
// time. Its one TTL for every entry cannot express "or at the token's exp,
// if sooner", and it reads the wall clock rather than the verifier's, so
// each entry carries its own deadline, checked on every lookup; the LRU's
// expiry only frees memory.
type verifiedCache struct {
	entries *expirable.LRU[string, verifiedEntry]
	ttl     time.Duration
	now     func() time.Time
}

type verifiedEntry struct {
	p     *Principal
	until time.Time
	kid   string // the JWKS key that signed the token ("" for HS256)
}

// minSweepTTL bounds how often the LRU sweeps (every hundredth of its TTL,
// on a goroutine of its own that lasts as long as the process): entries
// past a shorter ttl are refused on lookup and freed within this time.
const minSweepTTL = 10 * time.Second

// newVerifiedCache returns a cache of size entries. size must be positive:
// the LRU takes 0 as unbounded, so size 0 turns the cache off in New.
func newVerifiedCache(size int, ttl time.Duration, now func() time.Time) *verifiedCache {
	return &verifiedCache{
		entries: expirable.NewLRU[string, verifiedEntry](size, nil, max(ttl, minSweepTTL)),
		ttl:     ttl,
		now:     now,
	}
}

// get returns the cached entry of raw.
func (c *verifiedCache) get(raw string) (verifiedEntry, bool) {
	e, ok := c.entries.Get(raw)
	if !ok {
		return verifiedEntry{}, false
	}
	if !c.now().Before(e.until) {
		c.entries.Remove(raw)
		return verifiedEntry{}, false
	}
	return e, true
}

// drop forgets raw.
func (c *verifiedCache) drop(raw string) { c.entries.Remove(raw) }

// put caches p for raw, evicting the least recently used token when full:
// a cache miss only costs a verification.
func (c *verifiedCache) put(raw string, p *Principal, kid string) {
	now := c.now()
	until := now.Add(c.ttl)
	if !p.Expires.IsZero() && p.Expires.Before(until) {
		until = p.Expires
	}
	if !now.Before(until) {
		return
	}
	c.entries.Add(raw, verifiedEntry{p: p, until: until, kid: kid})
}
