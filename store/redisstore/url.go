package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrURL is behind every refused Redis address.
var ErrURL = errors.New("redisstore: invalid redis url")

func urlErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrURL, fmt.Sprintf(format, args...))
}

// Dial connects to the Redis deployment urls name and returns a store on
// it. The forms:
//
//	redis://[user:pass@]host:port[/db][?opts]          one server
//	rediss://…                                          the same over TLS
//	redis+cluster://[user:pass@]h1:p1,h2:p2,…[?opts]   Redis Cluster (seed nodes)
//	redis+sentinel://[user:pass@]h1:p1,h2:p2,…/master[/db][?opts]
//	                                                    Sentinel: the primary named master
//	rediss+cluster://…, rediss+sentinel://…             the same over TLS
//
// Several redis:// (or rediss://) URLs are the seed nodes of a Cluster.
// The user and password are those of the data nodes; Sentinels that need
// their own take sentinel_username and sentinel_password options. Options
// are go-redis's (dial_timeout, read_timeout, pool_size, …) plus the
// store's own: min_replicas and replica_timeout (WithMinReplicas) and
// call_timeout (WithCallTimeout). opts given here win over the URL's.
func Dial(ctx context.Context, urls []string, opts ...Option) (*Store, error) {
	c, own, err := newClient(urls)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, c, true, append(own, opts...))
}

// CheckURLs reports whether Dial would accept urls, without connecting.
func CheckURLs(urls []string) error {
	_, _, err := parseURLs(urls)
	return err
}

// newClient builds the client urls describe and the options their
// store-specific parameters set.
func newClient(urls []string) (redis.UniversalClient, []Option, error) {
	mk, own, err := parseURLs(urls)
	if err != nil {
		return nil, nil, err
	}
	return mk(), own, nil
}

// maker creates a parsed client; clients are created only to be used,
// never to check a configuration.
type maker func() redis.UniversalClient

func parseURLs(urls []string) (maker, []Option, error) {
	if len(urls) == 0 {
		return nil, nil, urlErr("no address")
	}
	if len(urls) > 1 {
		return clusterOfURLs(urls)
	}
	u := urls[0]
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return nil, nil, urlErr("%q has no scheme (redis://, rediss://, redis+cluster://, redis+sentinel://)", redact(u))
	}
	switch scheme {
	case "redis", "rediss":
		raw, own, err := storeParams(u)
		if err != nil {
			return nil, nil, err
		}
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, nil, urlErr("%s: %v", redact(u), err)
		}
		o.ContextTimeoutEnabled = true
		return func() redis.UniversalClient { return redis.NewClient(o) }, own, nil
	case "redis+cluster", "rediss+cluster":
		return clusterURL(strings.TrimSuffix(scheme, "+cluster"), rest, u)
	case "redis+sentinel", "rediss+sentinel":
		return sentinelURL(strings.TrimSuffix(scheme, "+sentinel"), rest, u)
	default:
		return nil, nil, urlErr("unknown scheme %q in %q (redis://, rediss://, redis+cluster://, redis+sentinel://)", scheme, redact(u))
	}
}

// multiHost splits "[user:pass@]h1:p1,h2:p2[/path][?query]" into its
// parts; every host must have a port.
func multiHost(rest string) (userinfo string, hosts []string, path, query string, err error) {
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		userinfo, rest = rest[:i], rest[i+1:]
	}
	for _, h := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" || port == "" {
			return "", nil, "", "", fmt.Errorf("host %q is not host:port", h)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return userinfo, hosts, path, query, nil
}

func clusterURL(scheme, rest, orig string) (maker, []Option, error) {
	userinfo, hosts, path, query, err := multiHost(rest)
	if err != nil {
		return nil, nil, urlErr("%s: %v", redact(orig), err)
	}
	if path != "" && path != "/" && path != "/0" {
		return nil, nil, urlErr("%s: a Redis Cluster has only database 0", redact(orig))
	}
	q, own, err := splitParams(query)
	if err != nil {
		return nil, nil, urlErr("%s: %v", redact(orig), err)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	return newCluster(scheme, userinfo, hosts[0], q, own, orig)
}

// clusterOfURLs is a Cluster given as several plain URLs, one per seed
// node: they must agree on everything but the address.
func clusterOfURLs(urls []string) (maker, []Option, error) {
	var (
		scheme, userinfo, query string
		hosts                   []string
	)
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, nil, urlErr("%s: %v", redact(raw), err)
		}
		if u.Scheme != "redis" && u.Scheme != "rediss" {
			return nil, nil, urlErr("%s: several --redis addresses are the seed nodes of a Redis Cluster and must all be redis:// or rediss://", redact(raw))
		}
		if u.Port() == "" {
			return nil, nil, urlErr("%s: no port", redact(raw))
		}
		if u.Path != "" && u.Path != "/" && u.Path != "/0" {
			return nil, nil, urlErr("%s: a Redis Cluster has only database 0", redact(raw))
		}
		ui := ""
		if u.User != nil {
			ui = u.User.String()
		}
		if i == 0 {
			scheme, userinfo, query = u.Scheme, ui, u.RawQuery
		} else if u.Scheme != scheme || ui != userinfo || u.RawQuery != query {
			return nil, nil, urlErr("the seed nodes of a Redis Cluster must share scheme, credentials and options; %s differs from the first", redact(raw))
		}
		hosts = append(hosts, u.Host)
	}
	q, own, err := splitParams(query)
	if err != nil {
		return nil, nil, urlErr("%v", err)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	return newCluster(scheme, userinfo, hosts[0], q, own, strings.Join(urls, ","))
}

func newCluster(scheme, userinfo, first string, q url.Values, own []Option, orig string) (maker, []Option, error) {
	raw := scheme + "://"
	if userinfo != "" {
		raw += userinfo + "@"
	}
	raw += first + "?" + q.Encode()
	o, err := redis.ParseClusterURL(raw)
	if err != nil {
		return nil, nil, urlErr("%s: %v", redact(orig), err)
	}
	o.ContextTimeoutEnabled = true
	return func() redis.UniversalClient { return redis.NewClusterClient(o) }, own, nil
}

func sentinelURL(scheme, rest, orig string) (maker, []Option, error) {
	o, own, err := parseSentinel(scheme, rest, orig)
	if err != nil {
		return nil, nil, err
	}
	return func() redis.UniversalClient { return redis.NewFailoverClient(o) }, own, nil
}

func parseSentinel(scheme, rest, orig string) (*redis.FailoverOptions, []Option, error) {
	userinfo, hosts, path, query, err := multiHost(rest)
	if err != nil {
		return nil, nil, urlErr("%s: %v", redact(orig), err)
	}
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if len(parts) == 0 || len(parts) > 2 {
		return nil, nil, urlErr("%s: want redis+sentinel://host:port,…/<master name>[/<db>]", redact(orig))
	}
	q, own, err := splitParams(query)
	if err != nil {
		return nil, nil, urlErr("%s: %v", redact(orig), err)
	}
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	q.Set("master_name", parts[0])
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	raw := scheme + "://" + hosts[0] + "/"
	if len(parts) == 2 {
		raw += parts[1]
	}
	o, err := redis.ParseFailoverURL(raw + "?" + q.Encode())
	if err != nil {
		return nil, nil, urlErr("%s: %v", redact(orig), err)
	}
	// ParseFailoverURL reads the URL's user as the Sentinels'; ours is the
	// data nodes', which is what every deployment has.
	if userinfo != "" {
		ui, err := url.Parse("redis://" + userinfo + "@h")
		if err != nil {
			return nil, nil, urlErr("%s: credentials: %v", redact(orig), err)
		}
		o.Username = ui.User.Username()
		o.Password, _ = ui.User.Password()
		if o.Password == "" && o.Username != "" {
			// redis://secret@host: a password alone, as go-redis reads it.
			o.Username, o.Password = "", o.Username
		}
	}
	o.SentinelUsername, o.SentinelPassword = sentinelUser, sentinelPass
	o.ContextTimeoutEnabled = true
	return o, own, nil
}

// storeParams removes the store's own options from a plain URL.
func storeParams(raw string) (string, []Option, error) {
	base, query, _ := strings.Cut(raw, "?")
	q, own, err := splitParams(query)
	if err != nil {
		return "", nil, urlErr("%s: %v", redact(raw), err)
	}
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	return base, own, nil
}

// splitParams parses a query and takes the store's own options out of it.
func splitParams(query string) (url.Values, []Option, error) {
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, nil, err
	}
	var own []Option
	take := func(name string) string {
		v := q.Get(name)
		q.Del(name)
		return v
	}
	minReplicas, replicaTimeout, callTimeout := take("min_replicas"), take("replica_timeout"), take("call_timeout")
	if minReplicas != "" || replicaTimeout != "" {
		n := 0
		if minReplicas != "" {
			if n, err = strconv.Atoi(minReplicas); err != nil || n < 0 {
				return nil, nil, fmt.Errorf("min_replicas=%q is not a number ≥ 0", minReplicas)
			}
		}
		var d time.Duration
		if replicaTimeout != "" {
			if d, err = time.ParseDuration(replicaTimeout); err != nil || d <= 0 {
				return nil, nil, fmt.Errorf("replica_timeout=%q is not a positive duration", replicaTimeout)
			}
		}
		own = append(own, WithMinReplicas(n, d))
	}
	if callTimeout != "" {
		d, err := time.ParseDuration(callTimeout)
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("call_timeout=%q is not a duration ≥ 0", callTimeout)
		}
		own = append(own, WithCallTimeout(d))
	}
	return q, own, nil
}

// redact hides a URL's passwords (in the user part and in options), for
// error messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	if base, query, ok := strings.Cut(rest, "?"); ok {
		parts := strings.Split(query, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok && strings.Contains(strings.ToLower(k), "password") {
				parts[i] = k + "=xxxxx"
			}
		}
		rest = base + "?" + strings.Join(parts, "&")
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		end = i
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return scheme + "://" + rest
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return scheme + "://xxxxx" + rest[at:] // a lone userinfo is a password to go-redis
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
