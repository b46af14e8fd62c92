// Package clientip finds the address of the client behind trusted proxies,
// and the scheme and authority a request was addressed to.
//
// It fails closed: forwarding headers are read only when the direct peer is
// a trusted proxy, and X-Forwarded-For is walked from the right, skipping
// trusted proxies, so a client cannot choose its own address by prepending
// entries. The scheme comes from the connection, never from the request
// line: a client that sends an absolute-form request-target (RFC 9112
// §3.2.2) cannot make a signature made for https://other.example verify
// over plain HTTP here (see Origin and CheckTarget).
package clientip

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
)

// Resolver answers questions about a request's origin. The zero value trusts
// no proxy and binds requests to the Host they name.
type Resolver struct {
	// Trusted lists the networks whose forwarding headers are believed.
	// Empty means none: only the direct peer address counts.
	Trusted []netip.Prefix
	// PublicAuthority, when set, is the authority (host[:port]) every
	// request is bound to, whatever Host it names (GATEWAY_PUBLIC_AUTHORITY).
	// Empty means the Host the client sent (or a trusted proxy's
	// X-Forwarded-Host).
	PublicAuthority string
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

// Origin returns the scheme and authority a request is bound to: Scheme(r),
// and PublicAuthority when set, else Host(r). It is what a signed request's
// @target-uri is rebuilt from.
func (res Resolver) Origin(r *http.Request) (scheme, authority string) {
	authority = res.PublicAuthority
	if authority == "" {
		authority = res.Host(r)
	}
	return res.Scheme(r), authority
}

// ErrForeignTarget is returned by CheckTarget.
var ErrForeignTarget = errors.New("clientip: the absolute-form request target names another origin")

// CheckTarget returns ErrForeignTarget when r's request-target is in
// absolute form (RFC 9112 §3.2.2) and names another server. It does when
// its scheme is not the connection's (Scheme), when it carries userinfo,
// or when its authority is not the one the request is bound to (Origin).
// Without PublicAuthority, that authority must also be an address the
// server listens on: the local address of the connection the request
// arrived on (http.LocalAddrContextKey), or localhost with that port when
// it is a loopback address. Go's server replaces Host with an
// absolute-form target's authority, so Host alone would let a request
// signed for http://evil.example:9999/… verify here. A request that did not arrive
// through a net/http server has no listen address, and its absolute-form
// target is refused unless it names PublicAuthority. Origin-form, asterisk
// form and client requests (no RequestURI) pass.
func (res Resolver) CheckTarget(r *http.Request) error {
	t := r.RequestURI
	if t == "" || t == "*" || strings.HasPrefix(t, "/") {
		return nil
	}
	u, err := url.Parse(t)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Opaque != "" {
		return ErrForeignTarget
	}
	scheme, authority := res.Origin(r)
	target := normalAuthority(u.Scheme, u.Host)
	if !strings.EqualFold(u.Scheme, scheme) || target != normalAuthority(scheme, authority) ||
		target != normalAuthority(scheme, r.Host) {
		return ErrForeignTarget
	}
	if res.PublicAuthority == "" && !listensOn(r, scheme, u.Host) {
		return ErrForeignTarget
	}
	return nil
}

// listensOn reports whether authority names the local address of the
// connection r arrived on: the same IP and port, or localhost and the
// port when that address is loopback. A port left out is the scheme's
// default.
func listensOn(r *http.Request, scheme, authority string) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return false
	}
	host, port, ok := SplitAuthority(authority)
	if !ok {
		return false
	}
	if port == "" {
		port = "80"
		if strings.EqualFold(scheme, "https") {
			port = "443"
		}
	}
	if port != strconv.Itoa(int(ap.Port())) {
		return false
	}
	addr := ap.Addr().Unmap()
	if strings.EqualFold(host, "localhost") {
		return addr.IsLoopback()
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && a.Zone() == "" && a.Unmap() == addr.WithZone("")
}

// normalAuthority returns authority lower-cased, without the default port
// of scheme (RFC 9110 §4.2.3), for comparisons.
func normalAuthority(scheme, authority string) string {
	authority = strings.ToLower(authority)
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		switch port := authority[i+1:]; {
		case port == "",
			port == "80" && strings.EqualFold(scheme, "http"),
			port == "443" && strings.EqualFold(scheme, "https"):
			authority = authority[:i]
		}
	}
	return authority
}

// RefuseForeignTarget is middleware that answers 400 REQUEST_TARGET_FOREIGN to a
// request whose CheckTarget fails, before next sees it.
func (res Resolver) RefuseForeignTarget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if res.CheckTarget(r) != nil {
			apierror.Write(w, r, errForeignTarget)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errForeignTarget = apierror.Coded(errcode.RequestTargetForeign,
	"the absolute-form request target names a scheme or authority other than this server's "+
		"(its listen address, or the configured public authority); send the path only (origin-form)")

// SplitAuthority splits an authority (a Host value) into host and port. The
// host is a bracketed IPv6 literal or a name or IPv4 literal without ':';
// the port, when present, is 1 to 5 digits. Anything else (userinfo, an
// unbracketed IPv6 address, an empty host or port) is refused.
func SplitAuthority(authority string) (host, port string, ok bool) {
	host, port = authority, ""
	if strings.HasPrefix(authority, "[") {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", false
		}
		host, port = authority[:end+1], authority[end+1:]
		if port != "" {
			if port[0] != ':' {
				return "", "", false
			}
			port = port[1:]
			if port == "" {
				return "", "", false
			}
		}
	} else if i := strings.IndexByte(authority, ':'); i >= 0 {
		host, port = authority[:i], authority[i+1:]
		if port == "" {
			return "", "", false
		}
	}
	if host == "" || strings.ContainsAny(host, "@/?#\\ ") || len(port) > 5 {
		return "", "", false
	}
	for _, c := range []byte(port) {
		if c < '0' || c > '9' {
			return "", "", false
		}
	}
	return host, port, true
}

// ValidHost reports whether host (as returned by SplitAuthority) is an IPv4
// literal, a bracketed IPv6 literal without a zone, or a DNS name: labels of
// ASCII letters, digits and hyphens, none empty (so no trailing dot).
func ValidHost(host string) bool {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		return err == nil && a.Is6() && a.Zone() == ""
	}
	if len(host) == 0 || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// LoopbackHost reports whether authority (a Host value, with or without
// port) is a loopback literal (127.0.0.0/8, [::1], also IPv4-mapped) or
// localhost in any case. Anything else, "localhost." and
// "127.0.0.1.nip.io" included, is a name some DNS server answers for, and
// a page can have such a name resolve to 127.0.0.1 (DNS rebinding).
func LoopbackHost(authority string) bool {
	host, _, ok := SplitAuthority(authority)
	if !ok {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if s, ok := strings.CutPrefix(host, "["); ok {
		a, err := netip.ParseAddr(strings.TrimSuffix(s, "]"))
		return strings.HasSuffix(s, "]") && err == nil && a.Is6() && a.Zone() == "" && a.Unmap().IsLoopback()
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Is4() && a.IsLoopback()
}

// IsLoopback reports whether the client of r is on this host: its
// address (per ClientAddr) is 127.0.0.0/8 or ::1, and, when r says it was
// forwarded for someone (forwarded), the direct peer is a trusted proxy
// that named the client in X-Forwarded-For. A same-host reverse proxy
// nobody listed as trusted is a loopback peer relaying anyone, so what it
// forwards never counts as loopback; nor does a trusted proxy's request
// whose client only Forwarded or X-Real-IP names, which are not read.
func (res Resolver) IsLoopback(r *http.Request) bool {
	if forwarded(r) && (!res.PeerTrusted(r) || len(r.Header.Values("X-Forwarded-For")) == 0) {
		return false
	}
	return res.ClientAddr(r).IsLoopback()
}

// forwarded reports whether r carries a header by which a proxy names
// the client it forwards for: X-Forwarded-For, Forwarded (RFC 7239) or
// X-Real-IP.
func forwarded(r *http.Request) bool {
	h := r.Header
	return len(h.Values("X-Forwarded-For")) > 0 || len(h.Values("Forwarded")) > 0 || len(h.Values("X-Real-IP")) > 0
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
