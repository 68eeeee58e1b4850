package redisstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestURLForms(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		c, own := mustClient(t, "redis://:pw@127.0.0.1:6379/2?dial_timeout=2s&min_replicas=1&replica_timeout=250ms&call_timeout=3s")
		o := c.(*redis.Client).Options()
		if o.Addr != "127.0.0.1:6379" || o.DB != 2 || o.Password != "pw" || o.DialTimeout != 2*time.Second || !o.ContextTimeoutEnabled {
			t.Fatalf("options %+v", o)
		}
		cfg := apply(own)
		if cfg.minReplicas != 1 || cfg.replicaTimeout != 250*time.Millisecond || cfg.callTimeout != 3*time.Second {
			t.Fatalf("store options %+v", cfg)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		c, _ := mustClient(t, "redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002?read_timeout=1s")
		o := c.(*redis.ClusterClient).Options()
		want := []string{"10.0.0.1:7000", "10.0.0.2:7001", "[::1]:7002"}
		if strings.Join(o.Addrs, " ") != strings.Join(want, " ") || o.Username != "u" || o.Password != "pw" ||
			o.ReadTimeout != time.Second || !o.ContextTimeoutEnabled || o.TLSConfig != nil {
			t.Fatalf("options %+v", o)
		}
		c, _ = mustClient(t, "rediss+cluster://h1:1,h2:2/")
		if c.(*redis.ClusterClient).Options().TLSConfig == nil {
			t.Fatal("rediss+cluster without TLS")
		}
	})
	t.Run("repeated", func(t *testing.T) {
		c, _ := mustClient(t, "redis://:pw@h1:7000", "redis://:pw@h2:7001", "redis://:pw@h3:7002")
		o := c.(*redis.ClusterClient).Options()
		if strings.Join(o.Addrs, " ") != "h1:7000 h2:7001 h3:7002" || o.Password != "pw" {
			t.Fatalf("options %+v", o)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		c, own := mustClient(t, "redis+sentinel://:pw@s1:26379,s2:26380,s3:26381/mymaster/3?sentinel_password=spw&min_replicas=1")
		if _, ok := c.(*redis.Client); !ok {
			t.Fatalf("client %T, want the failover *redis.Client", c)
		}
		_ = c.Close()
		o, _, err := sentinelOptions(t, "redis+sentinel://:pw@s1:26379,s2:26380,s3:26381/mymaster/3?sentinel_password=spw")
		if err != nil {
			t.Fatal(err)
		}
		if o.MasterName != "mymaster" || o.DB != 3 || o.Password != "pw" || o.SentinelPassword != "spw" ||
			strings.Join(o.SentinelAddrs, " ") != "s1:26379 s2:26380 s3:26381" {
			t.Fatalf("options %+v", o)
		}
		if apply(own).minReplicas != 1 {
			t.Fatal("min_replicas not applied")
		}
	})
}

func TestURLRefused(t *testing.T) {
	for _, urls := range [][]string{
		{},
		{"http://h:1"},
		{"h:6379"},
		{"redis+cluster://h1:1,h2"},
		{"redis+cluster://h1:1,h2:2/3"},
		{"redis+sentinel://s1:1,s2:2"},
		{"redis+sentinel://s1:1/m/0/x"},
		{"redis://h:1?min_replicas=-1"},
		{"redis://h:1?replica_timeout=0s"},
		{"redis://h:1?call_timeout=soon"},
		{"redis://h:1?no_such_option=1"},
		{"redis://h1:1", "rediss://h2:2"},
		{"redis://:a@h1:1", "redis://:b@h2:2"},
		{"redis://h1:1/1", "redis://h2:2/1"},
		{"redis://h1:1", "redis+cluster://h2:2"},
	} {
		c, _, err := newClient(urls)
		if err == nil {
			_ = c.Close()
			t.Errorf("%q accepted", urls)
			continue
		}
		if !errors.Is(err, ErrURL) {
			t.Errorf("%q: %v is not ErrURL", urls, err)
		}
		if strings.Contains(err.Error(), ":a@") || strings.Contains(err.Error(), ":b@") {
			t.Errorf("%q: password in %v", urls, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:1/0":            "redis://u:xxxxx@h:1/0",
		"redis://secret@h:1":                "redis://xxxxx@h:1",
		"redis+sentinel://:s@a:1,b:2/m":     "redis+sentinel://:xxxxx@a:1,b:2/m",
		"redis://h:1/0?sentinel_password=x": "redis://h:1/0?sentinel_password=xxxxx",
		"redis+cluster://h1:1,h2:2?addr=h":  "redis+cluster://h1:1,h2:2?addr=h",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustClient(t *testing.T, urls ...string) (redis.UniversalClient, []Option) {
	t.Helper()
	c, own, err := newClient(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, own
}

func apply(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}

// sentinelOptions repeats sentinelURL's parsing up to the options, which
// the failover client does not expose.
func sentinelOptions(t *testing.T, raw string) (*redis.FailoverOptions, []Option, error) {
	t.Helper()
	scheme, rest, _ := strings.Cut(raw, "://")
	return parseSentinel(strings.TrimSuffix(scheme, "+sentinel"), rest, raw)
}
