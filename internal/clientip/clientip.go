// Package clientip finds the address of the client behind trusted proxies.
//
// It fails closed: forwarding headers are read only when the direct peer is
// a trusted proxy, and X-Forwarded-For is walked from the right, skipping
// trusted proxies, so a client cannot choose its own address by prepending
// entries.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver answers questions about a request's origin. The zero value trusts
// no proxy.
type Resolver struct {
	// Trusted lists the networks whose forwarding headers are believed.
	// Empty means none: only the direct peer address counts.
	Trusted []netip.Prefix
}

// ParseCIDRs parses a comma-separated list of CIDR prefixes or single
// addresses, as in GATEWAY_TRUSTED_PROXY_CIDRS. Empty input gives nil.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("clientip: %q is not an address or CIDR prefix", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("clientip: %q is not an address or CIDR prefix", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Peer returns the direct peer address of r, or the zero Addr when
// RemoteAddr cannot be parsed.
func Peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// IsTrusted reports whether a lies in a trusted network.
func (res Resolver) IsTrusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range res.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// PeerTrusted reports whether the direct peer of r is a trusted proxy.
func (res Resolver) PeerTrusted(r *http.Request) bool { return res.IsTrusted(Peer(r)) }

// ClientAddr returns the client's address: the direct peer unless it is a
// trusted proxy, in which case the right-most X-Forwarded-For entry that is
// not itself a trusted proxy. An unparsable entry stops the walk and the
// last trusted hop is returned, so garbage never becomes the client address.
func (res Resolver) ClientAddr(r *http.Request) netip.Addr {
	addr := Peer(r)
	if !res.IsTrusted(addr) {
		return addr
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return addr
			}
			addr = a.Unmap()
			if !res.IsTrusted(addr) {
				return addr
			}
		}
	}
	return addr
}

// Scheme returns "https" when r arrived over TLS, or when a trusted proxy
// says so with X-Forwarded-Proto; else "http".
func (res Resolver) Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if res.PeerTrusted(r) {
		switch strings.ToLower(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto"))) {
		case "https":
			return "https"
		}
	}
	return "http"
}

// Host returns the authority the client addressed: r.Host, or the
// X-Forwarded-Host of a trusted proxy.
func (res Resolver) Host(r *http.Request) string {
	if res.PeerTrusted(r) {
		if h := strings.TrimSpace(r.Header.Get("X-Forwarded-Host")); h != "" {
			return h
		}
	}
	return r.Host
}

// IsLoopback reports whether the client address of r (per ClientAddr) is
// 127.0.0.0/8 or ::1.
func (res Resolver) IsLoopback(r *http.Request) bool {
	return res.ClientAddr(r).IsLoopback()
}

// Mask returns a for logs with its host part dropped: IPv4 masked to /24,
// IPv6 to /64 ("" for the zero Addr).
func Mask(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p.String()
}
