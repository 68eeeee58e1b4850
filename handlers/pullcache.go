package handlers

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/metrics"
)

// What makes pull pages cacheable (DESIGN §6.2): the scope hash that
// addresses a page per table scope, the Cache-Control of each kind of
// page, the strong ETag, the interval that moves a live poll's URL on, and
// the restart a 409 names.

// scopeHash names the table scope p reads stream with: a hash of the
// canonical form of its tables claim (the globs sorted, duplicates
// dropped; "*" for a claim that lets every table through), which decides
// every byte the outbound step keeps or drops (rows, DDL, the tables of
// control events). Two tokens with one hash get the same pages; tokens
// whose globs differ get different hashes even when they happen to read
// the same tables, which costs sharing, never exactness. 96 bits: a
// collision would have to be found among scopes the operator issues.
func scopeHash(stream string, p *auth.Principal) string {
	canon := "*"
	if p != nil && !p.TableFilter().AllowsAll() {
		globs := slices.Clone(p.Tables)
		slices.Sort(globs)
		canon = strings.Join(slices.Compact(globs), "\n")
	}
	sum := sha256.Sum256([]byte("vsg-scope\x00" + stream + "\x00" + canon))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// liveInterval is the unit of the interval a live page hands out: a
// poller at the live end passes it back as interval=, so that its next
// request has a URL no earlier answer was cached under. Pollers that
// start apart share it within one unit, and so share the cache's entry.
const liveInterval = 20 * time.Second

// nextInterval is the interval a page hands out: the current unit, or
// one past the request's when the page did not move the cursor (a
// long-poll that timed out empty): the next request at the same cursor
// must not find this answer in a cache again.
func nextInterval(asked int64, progressed bool, now time.Time) int64 {
	n := now.Unix() / int64(liveInterval/time.Second)
	if !progressed && asked >= n {
		n = asked + 1
	}
	return n
}

// startMaxAge bounds how long a first page without a cursor (a
// snapshot's) may be served from a cache: its chain of cursors must still
// resume from the binlogs when a reader follows it, and a reader arriving
// later expects a recent snapshot.
const startMaxAge = time.Minute

// conflictMaxAge is how long a 409 resume_impossible may be served from a
// cache: the cursor never becomes resumable again, and its restart URL
// leads to a fresh snapshot whenever it is followed.
const conflictMaxAge = time.Hour

// cacheControl returns the Cache-Control of a page and, when a shared
// cache may keep it, its kind (for the ETag and the metrics).
func (a *API) cacheControl(req *pullRequest, pg *page) (cc, kind string) {
	switch {
	case req.sub != "":
		// A named subscriber's pages are its own: its stored cursor
		// decides where a cursorless request starts.
		return "private, no-store", ""
	case !a.PullConfig.Cache || !req.shareable:
		return "no-store", ""
	case !pg.progressed && !pg.upToDate:
		// Nothing moved (a copy or a replay whose upstream sent nothing
		// within the wait): the reader asks again at once, at the same
		// URL, and only the gateway can answer it with more. Kept, this
		// answer would hold it at this cursor for as long as a cache
		// keeps a page.
		return "no-store", ""
	case pg.upToDate:
		// At the live end: a later request would answer with more. Only
		// a collapsed page (one answer for every poller on its key) is
		// kept, and briefly; an answer that did not move the cursor
		// only for a request that moves its URL on with interval=.
		if !req.collapsed || !pg.progressed && req.interval < 0 && req.wait > 0 {
			return "no-store", ""
		}
		return maxAge(a.PullConfig.LiveMaxAge, a.PullConfig.LiveMaxAge), metrics.PullLive
	case req.cursor == "":
		return maxAge(startMaxAge, startMaxAge), metrics.PullStart
	default:
		return maxAge(a.PullConfig.CacheMaxAge, a.PullConfig.CacheMaxAge), metrics.PullWhole
	}
}

func maxAge(age, stale time.Duration) string {
	return "public, max-age=" + strconv.Itoa(int(age/time.Second)) +
		", stale-while-revalidate=" + strconv.Itoa(int(stale/time.Second))
}

// etagOf is a strong validator of body: its 64-bit hash and length. Two
// gateways may cut the same cursor's page differently (another shard
// interleaving, a catch-up that had less ready), so the validator is of
// the bytes, never of the request.
func etagOf(body []byte) string {
	return `"` + strconv.FormatUint(xxhash.Sum64(body), 36) + "-" + strconv.FormatInt(int64(len(body)), 36) + `"`
}

// notModified reports whether an If-None-Match header names etag.
func notModified(r *http.Request, etag string) bool {
	for _, v := range r.Header.Values("If-None-Match") {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t == etag || t == "*" {
				return true
			}
		}
	}
	return false
}

// restartID marks one 409 resume_impossible: its restart URL carries it,
// so the snapshot a reader following it gets is made after the 409 and is
// never a first page a cache kept from before the gap (whose cursors
// would lead to the same 409 again).
func restartID(now time.Time) string { return strconv.FormatInt(now.UnixMilli(), 36) }

// restartURL is where a reader whose cursor cannot be resumed starts
// again: the request's URL without its cursor and interval, from a fresh
// snapshot (start=snapshot), marked with the 409's restart id.
func restartURL(r *http.Request, id string) string {
	q := r.URL.Query()
	q.Del("cursor")
	q.Del("interval")
	q.Set("start", "snapshot")
	q.Set("restart", id)
	return r.URL.Path + "?" + q.Encode()
}

// validRestart accepts what restartID makes (base 36, bounded): the
// parameter only keys the URL, and a cache key must stay small.
func validRestart(s string) bool {
	if len(s) == 0 || len(s) > 13 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// collapseKey identifies the requests that get the same page: the stream,
// the token's scope (not the URL's: a request without scope= is collapsed
// by its token's scope too), the format negotiated, and every query
// parameter, sorted (url.Values.Encode).
func collapseKey(stream, scope string, ndjson bool, q url.Values) string {
	f := "json"
	if ndjson {
		f = "ndjson"
	}
	return stream + "\x00" + scope + "\x00" + f + "\x00" + q.Encode()
}
