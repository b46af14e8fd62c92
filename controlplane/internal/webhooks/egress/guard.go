package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/idnhq/idn/identity/display"
)

// forbiddenPrefixes are the special-use ranges (IANA IPv4 and IPv6
// special-purpose registries) that are never targets unless private
// targets are allowed. Loopback, link-local, multicast and unspecified are
// caught by the netip predicates before this list is consulted.
var forbiddenPrefixes = mustPrefixes(
	"0.0.0.0/8",          // "this network"
	"10.0.0.0/8",         // RFC 1918
	"100.64.0.0/10",      // shared address space (CGNAT), RFC 6598
	"172.16.0.0/12",      // RFC 1918
	"192.0.0.0/24",       // IETF protocol assignments
	"192.0.2.0/24",       // TEST-NET-1
	"192.88.99.0/24",     // 6to4 relay anycast
	"192.168.0.0/16",     // RFC 1918
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // TEST-NET-2
	"203.0.113.0/24",     // TEST-NET-3
	"240.0.0.0/4",        // reserved, includes broadcast
	"::/96",              // IPv4-compatible (deprecated)
	"64:ff9b:1::/48",     // local-use NAT64
	"100::/64",           // discard-only
	"2001::/23",          // IETF protocol assignments (Teredo, ORCHID, …)
	"2001:db8::/32",      // documentation
	"fc00::/7",           // unique local (ULA)
	"fec0::/10",          // site-local (deprecated)
	"3fff::/20",          // documentation (RFC 9637)
	"5f00::/16",          // segment routing SIDs
	"2002::/16",          // 6to4: checked through its embedded IPv4 below
	"64:ff9b::/96",       // NAT64: checked through its embedded IPv4 below
	"ff00::/8",           // multicast
	"169.254.0.0/16",     // link-local, cloud metadata (169.254.169.254)
	"127.0.0.0/8",        // loopback
	"224.0.0.0/4",        // multicast
	"255.255.255.255/32", // broadcast
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// publicAddr reports whether ip may be a target: a global unicast
// address outside every special-use range. IPv4-mapped IPv6 is judged as
// the IPv4 address it carries; NAT64 and 6to4 addresses are judged by
// their embedded IPv4 address as well.
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() ||
		ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64Prefix.Contains(ip):
			return publicAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixToFour.Contains(ip):
			return publicAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// MaxURL bounds the length of a target URL.
const MaxURL = 2048

// CheckURL checks a target URL given by a user: absolute http or https, a
// host, no credentials, no fragment, at most MaxURL bytes. A host that is
// an IP literal must be public unless allowPrivate (else ErrForbidden, as
// for localhost names); host names are checked when they are dialled
// (every time), since what they resolve to can change. Other errors
// describe the problem in words fit for the user, without the package
// prefix.
func CheckURL(raw string, allowPrivate bool) error {
	if len(raw) > MaxURL {
		return fmt.Errorf("url must be at most %d bytes", MaxURL)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r <= 0x20 || r == 0x7f }) {
		return errors.New("url must not contain spaces or control characters")
	}
	if err := display.Check(raw); err != nil {
		return fmt.Errorf("url %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("url is not a valid URL")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return errors.New("url must be an absolute http or https URL")
	}
	if u.User != nil {
		return errors.New("url must not contain credentials")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("url must not contain a fragment")
	}
	host := u.Hostname()
	if host == "" || u.Opaque != "" {
		return errors.New("url must name a host")
	}
	if p := u.Port(); p != "" {
		if n, err := parsePort(p); err != nil || n == 0 {
			return errors.New("url port must be 1-65535")
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !allowPrivate && !publicAddr(ip) {
			return ErrForbidden
		}
		return nil
	}
	if strings.Contains(host, "%") || strings.Contains(host, ":") {
		return errors.New("url host is not a valid name or address")
	}
	// RFC 6761 reserves localhost names for loopback; refusing them here
	// only gives an earlier, clearer answer than the dial-time check.
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); !allowPrivate && (h == "localhost" || strings.HasSuffix(h, ".localhost")) {
		return ErrForbidden
	}
	return nil
}

func parsePort(p string) (int, error) {
	n := 0
	if len(p) > 5 {
		return 0, errors.New("port too long")
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, errors.New("port not numeric")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("port out of range")
	}
	return n, nil
}

// targetGuard dials targets. Every connection's peer address is checked
// in the dialer's Control hook, after name resolution and right before
// connect, so a name that resolves to a public address when the target is
// saved and to a private one later (DNS rebinding) is refused.
type targetGuard struct {
	allowPrivate bool
	resolver     *dohResolver // nil: the system resolver
	dialer       net.Dialer
}

func newTargetGuard(allowPrivate bool, resolver *dohResolver, timeout time.Duration) *targetGuard {
	g := &targetGuard{allowPrivate: allowPrivate, resolver: resolver}
	g.dialer = net.Dialer{Timeout: timeout, Control: g.control}
	return g
}

// control refuses connections to forbidden addresses.
func (g *targetGuard) control(network, address string, _ syscall.RawConn) error {
	if g.allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparseable address", ErrForbidden)
	}
	if !publicAddr(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbidden, ap.Addr().Unmap())
	}
	return nil
}

// DialContext resolves through the DNS-over-HTTPS resolver when one is
// configured (else the dialer uses the system resolver) and connects to
// the first address that accepts; Control vets each address.
func (g *targetGuard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if g.resolver == nil {
		return g.dialer.DialContext(ctx, network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return g.dialer.DialContext(ctx, network, addr)
	}
	ips, err := g.resolver.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, ip := range ips {
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}
