package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"8.8.8.8": "", "1.1.1.1": "", "2606:4700:4700::1111": "", "93.184.215.14": "",
		"127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback",
		"10.1.2.3": "private", "172.16.0.1": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"fd00::1": "private", "fc12::1": "private",
		"169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "::": "unspecified",
		"0.1.2.3": "reserved", "100.64.0.1": "reserved", "198.18.0.1": "reserved", "255.255.255.255": "reserved",
		"224.0.0.1": "link-local", "239.1.1.1": "multicast", "ff02::1": "link-local", "ff0e::1": "multicast",
		"::ffff:127.0.0.1":   "loopback", // IPv4-mapped
		"::ffff:10.0.0.1":    "private",
		"64:ff9b::a9fe:a9fe": "link-local", // NAT64 of 169.254.169.254
		"2002:7f00:1::":      "loopback",   // 6to4 of 127.0.0.1
		"2002:0808:0808::":   "",           // 6to4 of 8.8.8.8
		"2001:db8::1":        "documentation",
	}
	for in, want := range cases {
		if got := Classify(netip.MustParseAddr(in)); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// Ranges of the IANA special-purpose registries that are not loopback,
// private or link-local are refused too, and public addresses of every
// family still pass.
func TestClassifySpecialPurpose(t *testing.T) {
	refused := []string{
		"192.88.99.1",     // 6to4 relay anycast
		"192.31.196.1",    // AS112-v4
		"192.52.193.1",    // AMT
		"192.175.48.1",    // AS112 direct delegation
		"192.0.2.1",       // TEST-NET-1
		"64:ff9b:1::1",    // local-use NAT64
		"64:ff9b:1::a9fe", // local-use NAT64, not judged by its last 32 bits
		"2001::1",         // Teredo, within IETF protocol assignments
		"2001:2::1",       // benchmarking
		"2001:10::1",      // ORCHID
		"100::1",          // discard-only
		"3fff::1",         // documentation
		"2620:4f:8000::1", // AS112 direct delegation
		"4000::1",         // outside global unicast
		"::ffff:192.88.99.1",
		"64:ff9b::c058:6301", // NAT64 of 192.88.99.1
	}
	for _, in := range refused {
		if got := Classify(netip.MustParseAddr(in)); got == "" {
			t.Errorf("%s accepted", in)
		}
	}
	public := []string{
		"8.8.8.8", "9.9.9.9", "151.101.1.69", "2001:4860:4860::8888", "2a00:1450:4001::1",
		"::ffff:8.8.8.8", "64:ff9b::808:808",
	}
	for _, in := range public {
		if got := Classify(netip.MustParseAddr(in)); got != "" {
			t.Errorf("%s refused as %s", in, got)
		}
	}
	p := AddressPolicy{Resolver: mapResolver{"relay.example": {"192.88.99.1"}, "teredo.example": {"2001::1"}}}
	for _, u := range []string{"http://relay.example/", "http://teredo.example/", "http://[100::1]/", "http://[64:ff9b:1::1]/"} {
		if err := p.CheckURL(context.Background(), u); !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: %v, want a forbidden address", u, err)
		}
	}
	if err := p.control("tcp6", "[2001::1]:443", nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("dial to Teredo: %v", err)
	}
	if err := p.control("tcp4", "8.8.8.8:8443", nil); err != nil {
		t.Errorf("dial to a public address on any port: %v", err)
	}
}

type mapResolver map[string][]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range m[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if len(out) == 0 {
		return nil, errors.New("no such host")
	}
	return out, nil
}

func TestCheckURL(t *testing.T) {
	res := mapResolver{
		"hooks.example.com":  {"93.184.215.14"},
		"internal.example":   {"10.0.0.7"},
		"mixed.example":      {"93.184.215.14", "127.0.0.1"}, // any bad answer refuses
		"metadata.example":   {"169.254.169.254"},
		"v6.example":         {"2606:4700:4700::1111"},
		"v6-private.example": {"fd00::2"},
	}
	p := AddressPolicy{Resolver: res}
	ok := []string{
		"https://hooks.example.com/in", "http://hooks.example.com:8080/in?x=1",
		"https://93.184.215.14/in", "https://v6.example/", "https://[2606:4700:4700::1111]/",
	}
	for _, u := range ok {
		if err := p.CheckURL(context.Background(), u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	forbidden := []string{
		"http://127.0.0.1/", "http://localhost.:1/", "http://[::1]:8080/", "http://internal.example/",
		"http://mixed.example/", "http://metadata.example/latest/meta-data", "http://v6-private.example/",
		"http://169.254.169.254/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0:9/",
	}
	for _, u := range forbidden {
		err := p.CheckURL(context.Background(), u)
		if u == "http://localhost.:1/" {
			// Not in the fake resolver: refused as unresolvable, which is
			// also a refusal.
			if err == nil {
				t.Errorf("%s accepted", u)
			}
			continue
		}
		var fe *ForbiddenAddressError
		if !errors.As(err, &fe) || !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: %v, want a forbidden address", u, err)
		}
	}
	malformed := []string{
		"", "ftp://hooks.example.com/", "hooks.example.com/in", "https:///in", "https://user:pw@hooks.example.com/",
		"https://hooks.example.com/#frag", "https://hooks.example.com:99999/", "http://nowhere.example/",
	}
	for _, u := range malformed {
		var ve *ValidationError
		if err := p.CheckURL(context.Background(), u); !errors.As(err, &ve) || ve.Field != "url" {
			t.Errorf("%q: %v, want a url validation error", u, err)
		}
	}
	allow := AddressPolicy{AllowPrivate: true, Resolver: res}
	for _, u := range forbidden {
		if err := allow.CheckURL(context.Background(), u); err != nil {
			t.Errorf("with private allowed, %s: %v", u, err)
		}
	}
}

// The connection-time check holds even when the URL passed at creation:
// a host that later resolves to a loopback address (DNS rebinding) is
// refused when the gateway dials it.
func TestDialRefusesForbiddenAddress(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = true }))
	defer srv.Close()
	c := newHTTPClient(AddressPolicy{})
	wh := &Webhook{URL: srv.URL, Timeout: Duration(time.Second), Secrets: []StoredSecret{{Secret: testSecret}}}
	a := post(context.Background(), c, wh, "msg_1", []byte(`{}`), time.Now())
	if a.class != classRetry || a.kind != "blocked_address" || !errors.Is(a.err, ErrForbiddenAddress) || hit {
		t.Fatalf("attempt: class %v kind %q err %v, receiver hit %v", a.class, a.kind, a.err, hit)
	}
	// Allowed when private addresses are.
	a = post(context.Background(), newHTTPClient(AddressPolicy{AllowPrivate: true}), wh, "msg_1", []byte(`{}`), time.Now())
	if a.class != classDelivered || !hit {
		t.Fatalf("allowed attempt: %v %v", a.class, a.err)
	}
}
