package clientip

import (
	"crypto/tls"
	"net/http/httptest"
	"net/netip"
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
