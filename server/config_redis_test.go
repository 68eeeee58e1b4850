package server

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestConfigRedisAddresses(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  []string
		file string
		want []string
	}{
		"one url": {args: []string{"--redis", "redis://h:6379/0"}, want: []string{"redis://h:6379/0"}},
		"repeated flag (cluster seeds)": {
			args: []string{"--redis", "redis://h1:7000", "--redis", "redis://h2:7001"},
			want: []string{"redis://h1:7000", "redis://h2:7001"},
		},
		"cluster url in the environment keeps its commas": {
			env:  []string{"VSG_REDIS", "redis+cluster://h1:7000,h2:7001,h3:7002"},
			want: []string{"redis+cluster://h1:7000,h2:7001,h3:7002"},
		},
		"sentinel url": {
			args: []string{"--redis", "redis+sentinel://s1:26379,s2:26379/mymaster?min_replicas=1"},
			want: []string{"redis+sentinel://s1:26379,s2:26379/mymaster?min_replicas=1"},
		},
		"file list": {
			file: "redis: [redis://h1:7000, redis://h2:7001]\n",
			want: []string{"redis://h1:7000", "redis://h2:7001"},
		},
		"command line wins over the environment": {
			args: []string{"--redis", "redis://cli:1"},
			env:  []string{"VSG_REDIS", "redis://env:1"},
			want: []string{"redis://cli:1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--insecure-no-auth"}, tc.args...)
			if tc.file != "" {
				f := filepath.Join(t.TempDir(), "vsg.yaml")
				if err := os.WriteFile(f, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", f)
			}
			c, err := ParseFlags(args, env(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Redis, tc.want) {
				t.Fatalf("Redis = %q, want %q", c.Redis, tc.want)
			}
		})
	}
	for name, args := range map[string][]string{
		"not a url":             {"--redis", "localhost:6379"},
		"http":                  {"--redis", "http://h:1"},
		"sentinel w/o master":   {"--redis", "redis+sentinel://s1:1,s2:2"},
		"mixed seeds":           {"--redis", "redis://h1:1", "--redis", "redis+sentinel://s:1/m"},
		"unknown redis option":  {"--redis", "redis://h:1?colour=blue"},
		"negative min replicas": {"--redis", "redis+cluster://h1:1,h2:2?min_replicas=-1"},
	} {
		if _, err := ParseFlags(append([]string{"--insecure-no-auth"}, args...), env()); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want a configuration error", name, err)
		}
	}
}
