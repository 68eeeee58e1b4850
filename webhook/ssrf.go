package webhook

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// AddressPolicy decides which addresses webhooks may reach. Without
// AllowPrivate, a webhook must not make the gateway talk to itself, its
// network neighbours or a cloud metadata service (SSRF): loopback, private,
// link-local, shared (CGNAT) and other non-global addresses are refused —
// when the webhook is created, and again on every connection, because DNS
// may answer differently by then (rebinding).
type AddressPolicy struct {
	AllowPrivate bool
	// Resolver resolves URL hosts at creation; nil uses net.DefaultResolver.
	Resolver Resolver
}

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// specialV4 are IPv4 ranges that netip's predicates do not cover but that
// are not the public internet.
var specialV4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	docV6     = netip.MustParsePrefix("2001:db8::/32")
)

// Classify returns why ip must not be reached ("" when it may be).
// IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged
// by the embedded address, or they would be a way around the check.
func Classify(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[2:6])))
		case docV6.Contains(ip):
			return "documentation"
		}
	}
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsInterfaceLocalMulticast(), ip.IsMulticast():
		return "multicast"
	}
	if ip.Is4() {
		for _, p := range specialV4 {
			if p.Contains(ip) {
				return "reserved"
			}
		}
	}
	return ""
}

// CheckURL validates raw and, unless private addresses are allowed,
// resolves its host and refuses it if any address is forbidden (an
// attacker controlling DNS could otherwise pick whichever answer suits).
// A host that does not resolve is refused too: it cannot be delivered to.
func (p AddressPolicy) CheckURL(ctx context.Context, raw string) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	if p.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := Classify(ip); why != "" {
			return &ForbiddenAddressError{Host: host, Addr: ip.String(), Reason: why}
		}
		return nil
	}
	var r Resolver = net.DefaultResolver
	if p.Resolver != nil {
		r = p.Resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return invalid("url", "host %q does not resolve", host)
	}
	for _, ip := range addrs {
		if why := Classify(ip); why != "" {
			return &ForbiddenAddressError{Host: host, Addr: ip.Unmap().String(), Reason: why}
		}
	}
	return nil
}

// control is a net.Dialer Control hook: it runs after name resolution, on
// the address actually being connected to, so it holds even when DNS
// changed its answer since CheckURL.
func (p AddressPolicy) control(network, address string, _ syscall.RawConn) error {
	if p.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q", ErrForbiddenAddress, address)
	}
	if why := Classify(ap.Addr()); why != "" {
		return &ForbiddenAddressError{Addr: ap.Addr().Unmap().String(), Reason: why}
	}
	return nil
}
