package event

import (
	"net/netip"
	"testing"
)

var ipSeeds = []string{
	"", ":", "::", ":::", "::1", "1::", "1::2", "2001:db8::1", "::ffff:192.0.2.1", "::192.0.2.1",
	"2001:db8::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7::8", "1:2:3:4:5:6:7:8:9",
	"1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:1.2.3.4", "::1.2.3.4.5", "1:2:3:4:5:6:7:1.2.3.4",
	"12345::", "fffff::1", "FFFF::abcd", "1::2::3", "1:", ":1", "1:::2", "fe80::1%eth0",
	"0.0.0.0", "255.255.255.255", "256.0.0.1", "1.2.3", "1.2.3.4.", "01.2.3.4", "1..2.3",
	"192.168.0.1", "::ffff:01.2.3.4", "a.b.c.d", "1:2:3:4:5:6:7:8:", "::0:0", "0::0",
}

// TestParseIP checks the allocation-free parsers against net/netip.
func TestParseIP(t *testing.T) {
	for _, s := range ipSeeds {
		compareIP(t, s)
	}
}

func FuzzParseIP(f *testing.F) {
	for _, s := range ipSeeds {
		f.Add(s)
	}
	f.Fuzz(compareIP)
}

func compareIP(t *testing.T, s string) {
	ip, err := netip.ParseAddr(s)
	v4, ok4 := parseIPv4([]byte(s))
	if want := err == nil && ip.Is4(); ok4 != want || (ok4 && v4 != ip.As4()) {
		t.Errorf("parseIPv4(%q) = %v %v, netip %v %v", s, v4, ok4, ip, err)
	}
	v6, ok6 := parseIPv6([]byte(s))
	if want := err == nil && ip.Is6() && ip.Zone() == ""; ok6 != want || (ok6 && v6 != ip.As16()) {
		t.Errorf("parseIPv6(%q) = %v %v, netip %v %v", s, v6, ok6, ip, err)
	}
	if ok6 {
		// MariaDB's text form reads back as the same address.
		text := appendINET6Text(nil, &v6)
		back, ok := parseIPv6(text)
		if !ok || back != v6 {
			t.Errorf("%q: formatted as %q, which reads back as %v %v", s, text, back, ok)
		}
	}
}
