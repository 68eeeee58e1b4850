package server

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const testSecret = "0123456789abcdef0123456789abcdef"

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestConfigRefusesToStartWithoutAuth(t *testing.T) {
	_, err := ParseFlags(nil, env())
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--insecure-no-auth") {
		t.Fatalf("no auth: %v", err)
	}
	for name, args := range map[string][]string{
		"both":          {"--insecure-no-auth", "--jwt-secret", testSecret},
		"short secret":  {"--jwt-secret", "short"},
		"jwks not http": {"--jwks-url", "file:///etc/passwd"},
		"cert w/o key":  {"--insecure-no-auth", "--vtgate-cert", "c.pem"},
		"password only": {"--insecure-no-auth", "--vtgate-password", "x"},
		"bad origin":    {"--insecure-no-auth", "--cors-origins", "example.com"},
		"tiny ws limit": {"--insecure-no-auth", "--ws-read-limit", "10"},
		"limit order":   {"--insecure-no-auth", "--default-limit", "20", "--max-limit", "10"},
		"stall < 0":     {"--insecure-no-auth", "--stall-timeout", "-1s"},
		"stall w/o hb":  {"--insecure-no-auth", "--heartbeat", "0"},
		"stall ≈ hb":    {"--insecure-no-auth", "--heartbeat", "5s", "--stall-timeout", "10s"},
		"poll < 0":      {"--insecure-no-auth", "--primary-poll", "-1s"},
		"poll tiny":     {"--insecure-no-auth", "--primary-poll", "10ms"},
	} {
		if _, err := ParseFlags(args, env()); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want a configuration error", name, err)
		}
	}
	for name, args := range map[string][]string{
		"insecure":  {"--insecure-no-auth"},
		"secret":    {"--jwt-secret", testSecret},
		"jwks":      {"--jwks-url", "https://idp.example/jwks.json"},
		"no stall":  {"--insecure-no-auth", "--heartbeat", "0", "--stall-timeout", "0"},
		"stall 3hb": {"--insecure-no-auth", "--heartbeat", "2s", "--stall-timeout", "6s"},
		"no poll":   {"--insecure-no-auth", "--primary-poll", "0"},
	} {
		if _, err := ParseFlags(args, env()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vsg.yaml")
	os.WriteFile(file, []byte(`
listen: ":9000"
vtgate: file-vtgate:15991
max-wait: 30s
max-conns-per-token: 7
admin-rate: 2.5
insecure-no-auth: true
cors-origins: [https://a.example, https://b.example]
`), 0o600)
	c, err := ParseFlags([]string{"--config", file, "--listen", ":7000"}, env("VSG_VTGATE", "env-vtgate:1", "VSG_WS_QUEUE", "9"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":7000" || c.Vtgate != "env-vtgate:1" || c.MaxWait != 30*time.Second || c.MaxConnsPerToken != 7 ||
		c.AdminRate != 2.5 || !c.InsecureNoAuth || c.WSQueue != 9 || !slices.Equal(c.CORSOrigins, []string{"https://a.example", "https://b.example"}) {
		t.Errorf("flag > env > file > default not respected: %+v", c)
	}

	// Lists: environment is comma-separated; the command line replaces it.
	c, err = ParseFlags([]string{"--jwt-secret", testSecret + "-c"}, env("VSG_JWT_SECRET", testSecret+"-a,"+testSecret+"-b"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.JWTSecrets, []string{testSecret + "-c"}) {
		t.Errorf("secrets %v", c.JWTSecrets)
	}
	c, err = ParseFlags(nil, env("VSG_JWT_SECRET", testSecret+"-a,"+testSecret+"-b"))
	if err != nil || len(c.JWTSecrets) != 2 {
		t.Errorf("secrets from env: %v %v", c, err)
	}
	c, err = ParseFlags([]string{"--jwt-secret", testSecret + "-1", "--jwt-secret", testSecret + "-2"}, env())
	if err != nil || len(c.JWTSecrets) != 2 {
		t.Errorf("repeated flag: %v %v", c, err)
	}

	// Mistakes are errors, not silently ignored.
	os.WriteFile(file, []byte("jwt-secrett: x\n"), 0o600)
	if _, err := ParseFlags([]string{"--config=" + file, "--insecure-no-auth"}, env()); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := ParseFlags([]string{"--insecure-no-auth"}, env("VSG_MAX_WAIT", "forever")); !errors.Is(err, ErrConfig) {
		t.Errorf("bad env duration: %v", err)
	}
	if _, err := ParseFlags(nil, env("VSG_CONFIG", filepath.Join(dir, "missing.yaml"))); !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}
