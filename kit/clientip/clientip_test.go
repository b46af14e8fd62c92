package clientip

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseCIDRs("10.0.0.0/8, 192.168.1.1, ::1")
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{"direct peer, no proxies", nil, "203.0.113.9:1234", nil, "203.0.113.9"},
		{"spoofed XFF from an untrusted peer is ignored", nil, "203.0.113.9:1234", []string{"127.0.0.1"}, "203.0.113.9"},
		{"spoofed XFF with trusted proxies but untrusted peer", trusted, "203.0.113.9:1234", []string{"127.0.0.1"}, "203.0.113.9"},
		{"one trusted proxy", trusted, "10.1.2.3:80", []string{"198.51.100.7"}, "198.51.100.7"},
		{"client-prepended entries are skipped from the right", trusted, "10.1.2.3:80", []string{"127.0.0.1, 198.51.100.7"}, "198.51.100.7"},
		{"chain of trusted proxies", trusted, "10.1.2.3:80", []string{"198.51.100.7, 192.168.1.1", "10.9.9.9"}, "198.51.100.7"},
		{"garbage entry stops the walk", trusted, "10.1.2.3:80", []string{"198.51.100.7, not-an-ip"}, "10.1.2.3"},
		{"all hops trusted", trusted, "10.1.2.3:80", []string{"10.0.0.1"}, "10.0.0.1"},
		{"IPv6 loopback proxy", trusted, "[::1]:80", []string{"2001:db8::1"}, "2001:db8::1"},
		{"IPv4-mapped peer is unmapped", nil, "[::ffff:203.0.113.9]:1", nil, "203.0.113.9"},
		{"unparsable RemoteAddr", trusted, "garbage", []string{"198.51.100.7"}, "invalid IP"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = row.remote
			for _, v := range row.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := (Resolver{Trusted: row.trusted}).ClientAddr(r).String(); got != row.want {
				t.Errorf("ClientAddr = %s, want %s", got, row.want)
			}
		})
	}
}

// TestIsLoopback: the rule both servers apply to their loopback-only
// routes. A loopback peer counts unless it says it forwards for someone;
// then only a trusted proxy's X-Forwarded-For names the client.
func TestIsLoopback(t *testing.T) {
	loopbackProxy, _ := ParseCIDRs("127.0.0.1")
	proxies, _ := ParseCIDRs("10.0.0.0/8")
	rows := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		headers map[string]string
		want    bool
	}{
		{"loopback peer", nil, "127.0.0.1:1", nil, true},
		{"IPv6 loopback peer", nil, "[::1]:1", nil, true},
		{"remote peer", nil, "203.0.113.9:1", nil, false},
		{"remote peer forging a loopback X-Forwarded-For", nil, "203.0.113.9:1", map[string]string{"X-Forwarded-For": "127.0.0.1"}, false},
		{"same-host proxy, untrusted, X-Forwarded-For", nil, "127.0.0.1:1", map[string]string{"X-Forwarded-For": "203.0.113.9"}, false},
		{"same-host proxy, untrusted, loopback X-Forwarded-For", nil, "127.0.0.1:1", map[string]string{"X-Forwarded-For": "127.0.0.1"}, false},
		{"same-host proxy, untrusted, Forwarded", nil, "127.0.0.1:1", map[string]string{"Forwarded": "for=203.0.113.9"}, false},
		{"same-host proxy, untrusted, X-Real-IP", nil, "127.0.0.1:1", map[string]string{"X-Real-IP": "203.0.113.9"}, false},
		{"same-host proxy, untrusted, empty X-Forwarded-For", nil, "127.0.0.1:1", map[string]string{"X-Forwarded-For": ""}, false},
		{"trusted same-host proxy, remote client", loopbackProxy, "127.0.0.1:1", map[string]string{"X-Forwarded-For": "203.0.113.9"}, false},
		{"trusted same-host proxy, loopback client", loopbackProxy, "127.0.0.1:1", map[string]string{"X-Forwarded-For": "127.0.0.1"}, true},
		{"trusted same-host proxy, client in X-Real-IP only", loopbackProxy, "127.0.0.1:1", map[string]string{"X-Real-IP": "127.0.0.1"}, false},
		{"trusted proxy, loopback client", proxies, "10.0.0.1:1", map[string]string{"X-Forwarded-For": "127.0.0.1"}, true},
		{"trusted proxy, remote client", proxies, "10.0.0.1:1", map[string]string{"X-Forwarded-For": "203.0.113.9", "X-Real-IP": "127.0.0.1"}, false},
		{"trusted proxy, forwarding nothing", proxies, "10.0.0.1:1", nil, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = row.remote
			for k, v := range row.headers {
				r.Header.Set(k, v)
			}
			if got := (Resolver{Trusted: row.trusted}).IsLoopback(r); got != row.want {
				t.Errorf("IsLoopback = %v, want %v", got, row.want)
			}
		})
	}
}

func TestSchemeAndHost(t *testing.T) {
	trusted, _ := ParseCIDRs("10.0.0.0/8")
	res := Resolver{Trusted: trusted}
	r := httptest.NewRequest("GET", "http://gw.internal/x", nil)
	r.RemoteAddr = "203.0.113.9:1"
	r.Header.Set("X-Forwarded-Proto", "https")
	r.Header.Set("X-Forwarded-Host", "evil.example")
	if res.Scheme(r) != "http" || res.Host(r) != "gw.internal" {
		t.Errorf("untrusted peer's forwarding headers were believed: %s %s", res.Scheme(r), res.Host(r))
	}
	r.RemoteAddr = "10.0.0.5:1"
	if res.Scheme(r) != "https" || res.Host(r) != "evil.example" {
		t.Errorf("trusted proxy's forwarding headers were ignored: %s %s", res.Scheme(r), res.Host(r))
	}
	r.TLS = &tls.ConnectionState{}
	r.Header.Set("X-Forwarded-Proto", "http")
	if res.Scheme(r) != "https" {
		t.Errorf("TLS connection reported as %s", res.Scheme(r))
	}
}

func TestParseCIDRs(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "nope", "1.2.3.4/x"} {
		if _, err := ParseCIDRs(bad); err == nil {
			t.Errorf("ParseCIDRs(%q) accepted", bad)
		}
	}
	got, err := ParseCIDRs(" 10.1.2.3/8 ,,::1 ")
	if err != nil || len(got) != 2 || got[0].String() != "10.0.0.0/8" || got[1].String() != "::1/128" {
		t.Errorf("ParseCIDRs = %v, %v", got, err)
	}
}

func FuzzClientAddr(f *testing.F) {
	trusted, _ := ParseCIDRs("10.0.0.0/8,::1")
	f.Add("10.0.0.1:80", "1.2.3.4, 10.0.0.2")
	f.Add("[::1]:1", "::ffff:1.2.3.4,garbage")
	f.Add("x", "")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		a := (Resolver{Trusted: trusted}).ClientAddr(r)
		// Only a trusted peer can make the result differ from the peer.
		if peer := Peer(r); !(Resolver{Trusted: trusted}).IsTrusted(peer) && a != peer {
			t.Fatalf("untrusted peer %v yielded %v", peer, a)
		}
	})
}

// serverRequest parses raw as net/http's server does (Host from an
// absolute-form target, RequestURI as received).
func serverRequest(t testing.TB, raw, remote string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(strings.ReplaceAll(raw, "\n", "\r\n") + "\r\n\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = remote
	return r
}

// arrivedOn records local as the address of the connection r arrived on,
// as net/http's server does.
func arrivedOn(r *http.Request, local string) *http.Request {
	if local == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(local))))
}

func TestCheckTarget(t *testing.T) {
	trusted, _ := ParseCIDRs("10.0.0.0/8")
	const listen = "127.0.0.1:38100"
	rows := []struct {
		name      string
		public    string
		raw       string
		remote    string
		local     string
		tls       bool
		wantError bool
	}{
		{"origin_form", "", "GET /proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, false},
		{"origin_form_without_listener", "", "GET /proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", "", false, false},
		{"asterisk_form", "", "OPTIONS * HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, false},
		{"absolute_form_listen_address", "", "GET http://127.0.0.1:38100/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, false},
		{"absolute_form_localhost_on_loopback_listener", "", "GET http://LOCALHOST:38100/proxy/x HTTP/1.1\nHost: localhost:38100", "127.0.0.1:1", listen, false, false},
		{"absolute_form_ipv6_listen_address", "", "GET http://[::1]:38100/proxy/x HTTP/1.1\nHost: [::1]:38100", "[::1]:1", "[::1]:38100", false, false},
		{"absolute_form_default_port_spelled_out", "", "GET http://127.0.0.1:80/proxy/x HTTP/1.1\nHost: 127.0.0.1", "127.0.0.1:1", "127.0.0.1:80", false, false},
		{"absolute_form_foreign_authority_replaces_host", "", "GET http://evil.example:9999/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, true},
		{"absolute_form_other_port_of_listen_ip", "", "GET http://127.0.0.1:9999/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, true},
		{"absolute_form_localhost_on_public_listener", "", "GET http://localhost:38100/proxy/x HTTP/1.1\nHost: localhost:38100", "192.0.2.7:1", "192.0.2.1:38100", false, true},
		{"absolute_form_without_listener", "", "GET http://127.0.0.1:38100/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", "", false, true},
		{"absolute_form_https_over_plain_http", "", "GET https://evil.example/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, true},
		{"absolute_form_http_over_tls", "gw.example", "GET http://gw.example/proxy/x HTTP/1.1\nHost: gw.example", "127.0.0.1:1", listen, true, true},
		{"absolute_form_https_over_tls", "gw.example", "GET https://gw.example/proxy/x HTTP/1.1\nHost: gw.example", "127.0.0.1:1", listen, true, false},
		{"absolute_form_https_claimed_by_untrusted_forwarded_proto", "gw.example", "GET https://gw.example/proxy/x HTTP/1.1\nHost: gw.example\nX-Forwarded-Proto: https", "203.0.113.9:1", listen, false, true},
		{"absolute_form_https_behind_trusted_tls_proxy", "gw.example", "GET https://gw.example/proxy/x HTTP/1.1\nHost: gw.example\nX-Forwarded-Proto: https", "10.0.0.1:1", listen, false, false},
		{"absolute_form_other_authority_than_forwarded_host", "", "GET http://evil.example/proxy/x HTTP/1.1\nHost: evil.example\nX-Forwarded-Host: gw.example", "10.0.0.1:1", listen, false, true},
		{"absolute_form_other_authority_than_public_authority", "gw.example", "GET http://evil.example/proxy/x HTTP/1.1\nHost: gw.example", "127.0.0.1:1", listen, false, true},
		{"absolute_form_public_authority", "gw.example:8443", "GET http://GW.example:8443/proxy/x HTTP/1.1\nHost: 127.0.0.1", "127.0.0.1:1", "", false, false},
		{"absolute_form_with_userinfo", "", "GET http://user@127.0.0.1:38100/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, true},
		{"absolute_form_other_scheme", "", "GET ftp://127.0.0.1:38100/proxy/x HTTP/1.1\nHost: 127.0.0.1:38100", "127.0.0.1:1", listen, false, true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := arrivedOn(serverRequest(t, row.raw, row.remote), row.local)
			if row.tls {
				r.TLS = &tls.ConnectionState{}
			}
			err := Resolver{Trusted: trusted, PublicAuthority: row.public}.CheckTarget(r)
			if (err != nil) != row.wantError {
				t.Fatalf("CheckTarget = %v, want error %v", err, row.wantError)
			}
		})
	}
}

// TestCheckTargetHostMismatch covers a request whose Host differs from its
// absolute-form target, as a server other than net/http's (or a hand-built
// request) presents it.
func TestCheckTargetHostMismatch(t *testing.T) {
	r := httptest.NewRequest("GET", "http://evil.example/proxy/x", nil)
	r.Host = "127.0.0.1:38100"
	if err := (Resolver{}).CheckTarget(r); !errors.Is(err, ErrForeignTarget) {
		t.Fatalf("CheckTarget = %v, want ErrForeignTarget", err)
	}
}

func TestRefuseForeignTarget(t *testing.T) {
	h := Resolver{}.RefuseForeignTarget(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for target, want := range map[string]int{"/x": http.StatusTeapot, "https://evil.example/x": http.StatusBadRequest} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, serverRequest(t, "GET "+target+" HTTP/1.1\nHost: evil.example", "127.0.0.1:1"))
		if rec.Code != want || (want == http.StatusBadRequest && !strings.Contains(rec.Body.String(), `"REQUEST_TARGET_FOREIGN"`)) {
			t.Errorf("%s: %d %s, want %d", target, rec.Code, rec.Body, want)
		}
	}
}

func TestOrigin(t *testing.T) {
	r := serverRequest(t, "GET /x HTTP/1.1\nHost: evil.example", "127.0.0.1:1")
	if s, a := (Resolver{}).Origin(r); s != "http" || a != "evil.example" {
		t.Errorf("Origin = %s %s, want the Host", s, a)
	}
	if s, a := (Resolver{PublicAuthority: "gw.example"}).Origin(r); s != "http" || a != "gw.example" {
		t.Errorf("Origin = %s %s, want the public authority whatever Host says", s, a)
	}
}

func TestSplitAuthority(t *testing.T) {
	rows := []struct {
		in, host, port string
		ok             bool
	}{
		{"localhost", "localhost", "", true},
		{"localhost:38100", "localhost", "38100", true},
		{"[::1]", "[::1]", "", true},
		{"[::1]:80", "[::1]", "80", true},
		{"::1", "", "", false},
		{"[::1", "", "", false},
		{"[::1]x", "", "", false},
		{"[::1]:", "", "", false},
		{"localhost:", "", "", false},
		{"localhost:80:80", "", "", false},
		{"localhost:123456", "", "", false},
		{"user@localhost", "", "", false},
		{"", "", "", false},
		{":80", "", "", false},
	}
	for _, row := range rows {
		host, port, ok := SplitAuthority(row.in)
		if host != row.host || port != row.port || ok != row.ok {
			t.Errorf("SplitAuthority(%q) = %q %q %v, want %q %q %v", row.in, host, port, ok, row.host, row.port, row.ok)
		}
	}
}

func TestValidHost(t *testing.T) {
	for host, want := range map[string]bool{
		"gw.example.com": true, "127.0.0.1": true, "[::1]": true, "[2001:db8::1]": true, "LOCALHOST": true,
		"gw.example.com.": false, "[::1%25eth0]": false, "[127.0.0.1]": false, "a..b": false, "a_b": false, "": false, "*.example.com": false,
	} {
		if got := ValidHost(host); got != want {
			t.Errorf("ValidHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func FuzzCheckTarget(f *testing.F) {
	f.Add("GET https://evil.example/x HTTP/1.1\r\nHost: gw.example\r\n\r\n", false)
	f.Add("GET /x HTTP/1.1\r\nHost: gw.example\r\n\r\n", true)
	f.Add("GET http://gw.example:80/x HTTP/1.1\r\nHost: gw.example\r\n\r\n", false)
	f.Fuzz(func(t *testing.T, raw string, overTLS bool) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		r.RemoteAddr = "203.0.113.9:1"
		if overTLS {
			r.TLS = &tls.ConnectionState{}
		}
		res := Resolver{PublicAuthority: "gw.example"}
		if res.CheckTarget(r) != nil || strings.HasPrefix(r.RequestURI, "/") || r.RequestURI == "*" {
			return
		}
		// An accepted absolute-form target names exactly the origin the
		// signature is checked against.
		u, err := url.Parse(r.RequestURI)
		scheme, authority := res.Origin(r)
		if err != nil || !strings.EqualFold(u.Scheme, scheme) || normalAuthority(scheme, u.Host) != normalAuthority(scheme, authority) {
			t.Fatalf("accepted %q for origin %s://%s", r.RequestURI, scheme, authority)
		}
	})
}

func TestLoopbackHost(t *testing.T) {
	for authority, want := range map[string]bool{
		"localhost": true, "localhost:38100": true, "LOCALHOST:1": true, "127.0.0.1": true, "127.9.9.9:80": true,
		"[::1]": true, "[::1]:38100": true, "[0:0:0:0:0:0:0:1]": true, "[::ffff:127.0.0.1]:1": true,
		"rebind.evil.example":    false, // a name the attacker's DNS answers for
		"localhost.evil.example": false,
		"127.0.0.1.nip.io":       false,
		"localhost.":             false, // a trailing dot makes it a fully qualified DNS name
		"localhost.:38100":       false,
		"127.1":                  false, // short forms are names to a resolver, not literals here
		"2130706433":             false,
		"0x7f000001":             false,
		"::1":                    false, // unbracketed IPv6 is not a Host value
		"[::1%25lo]":             false,
		"[127.0.0.1]":            false,
		"0.0.0.0":                false,
		"":                       false,
		"localhost:x":            false,
	} {
		if got := LoopbackHost(authority); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", authority, got, want)
		}
	}
}
