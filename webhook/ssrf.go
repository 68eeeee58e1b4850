package webhook

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
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

// guardian holds the forbidden ranges: the IANA special-purpose registries
// for IPv4 and IPv6 plus everything outside IPv6 global unicast (2000::/3),
// kept up to date by the library rather than by hand here. Any port is
// allowed: receivers listen where they like.
var guardian = ssrf.New(ssrf.WithAnyPort())

var (
	// NAT64 and 6to4 addresses embed an IPv4 address and are judged by it:
	// 64:ff9b::a9fe:a9fe is the metadata service, 64:ff9b::808:808 a public
	// resolver. Other NAT64 prefixes (64:ff9b:1::/48, local use) stay refused.
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// documentation names what the registries set aside for examples; any
	// other range the guardian refuses is "reserved".
	documentation = []netip.Prefix{
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("3fff::/20"),
	}
)

// Classify returns why ip must not be reached ("" when it may be).
// IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged
// by the embedded address, or they would be a way around the check. The
// decision is the guardian's; netip's predicates only name the common
// reasons so that a refusal says what the address is.
func Classify(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[2:6])))
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
	if guardian.SafeAddr(ip) == nil {
		return ""
	}
	for _, p := range documentation {
		if p.Contains(ip) {
			return "documentation"
		}
	}
	return "reserved"
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
