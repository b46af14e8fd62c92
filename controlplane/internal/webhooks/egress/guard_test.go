package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/webhooks/egress/egresstest"
)

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ip string
		public   bool
	}{
		{"public IPv4", "93.184.216.34", true},
		{"public IPv6", "2606:4700:4700::1111", true},
		{"NAT64 of a public address", "64:ff9b::5db8:d822", true},
		{"loopback", "127.0.0.1", false},
		{"loopback range", "127.1.2.3", false},
		{"RFC 1918 10/8", "10.1.2.3", false},
		{"RFC 1918 172.16/12", "172.31.255.1", false},
		{"RFC 1918 192.168/16", "192.168.0.10", false},
		{"cloud metadata link-local", "169.254.169.254", false},
		{"CGNAT", "100.64.1.1", false},
		{"unspecified", "0.0.0.0", false},
		{"this network", "0.1.2.3", false},
		{"broadcast", "255.255.255.255", false},
		{"multicast", "224.0.0.1", false},
		{"reserved 240/4", "240.0.0.1", false},
		{"TEST-NET-3", "203.0.113.9", false},
		{"benchmarking", "198.18.0.1", false},
		{"IPv6 loopback", "::1", false},
		{"IPv6 unspecified", "::", false},
		{"IPv6 ULA", "fd12:3456::1", false},
		{"IPv6 link-local", "fe80::1", false},
		{"IPv6 multicast", "ff02::1", false},
		{"IPv6 documentation", "2001:db8::1", false},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", false},
		{"IPv4-mapped RFC 1918", "::ffff:10.0.0.1", false},
		{"IPv4-mapped metadata", "::ffff:169.254.169.254", false},
		{"IPv4-compatible loopback", "::127.0.0.1", false},
		{"NAT64 of loopback", "64:ff9b::7f00:1", false},
		{"6to4 of RFC 1918", "2002:0a00:0001::1", false},
		{"Teredo", "2001:0:4136:e378::1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := publicAddr(netip.MustParseAddr(tc.ip)); got != tc.public {
				t.Fatalf("publicAddr(%s) = %v, want %v", tc.ip, got, tc.public)
			}
		})
	}
}

func TestDoHResolver(t *testing.T) {
	t.Parallel()
	doh := egresstest.NewDoHServer(t, map[string][]string{
		"hooks.example.com": {"93.184.216.34", "2606:4700::1"},
		"edge.example.net":  {"203.0.113.50"},
	}, map[string]string{"alias.example.com": "edge.example.net"})
	r, err := newDoHResolver(doh.URL+"/dns-query", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.lookup(context.Background(), "hooks.example.com")
	if err != nil || len(got) != 2 || got[0].String() != "93.184.216.34" || got[1].String() != "2606:4700::1" {
		t.Fatalf("lookup = %v, %v", got, err)
	}
	if got, err := r.lookup(context.Background(), "alias.example.com."); err != nil || len(got) != 1 || got[0].String() != "203.0.113.50" {
		t.Fatalf("CNAME lookup = %v, %v", got, err)
	}
	if _, err := r.lookup(context.Background(), "missing.example.com"); !errors.Is(err, ErrResolve) {
		t.Fatalf("missing name: %v", err)
	}
	if doh.Queries() != 6 {
		t.Fatalf("DoH server saw %d queries, want 6 (A and AAAA per lookup)", doh.Queries())
	}
}

// TestDialRefusesPrivate: every private or special-use address is
// refused when dialled, unless private targets are allowed.
func TestDialRefusesPrivate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, addr := range []string{
		"127.0.0.1:" + port, "[::1]:" + port, "[::ffff:127.0.0.1]:" + port, "10.0.0.1:80", "192.168.1.1:80",
		"169.254.169.254:80", "[fd00::1]:80", "[fe80::1]:80", "100.64.0.1:80", "0.0.0.0:" + port,
	} {
		t.Run(addr, func(t *testing.T) {
			g := newTargetGuard(false, nil, time.Second)
			if c, err := g.DialContext(context.Background(), "tcp", addr); !errors.Is(err, ErrForbidden) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("dial %s: %v, want refused", addr, err)
			}
		})
	}
	// The listener is reachable at all: the guard is what refused it.
	c, err := newTargetGuard(true, nil, time.Second).DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("allow-private dial: %v", err)
	}
	c.Close()
}

// TestClient: the client refuses names that resolve to private addresses
// (DNS rebinding, through the DoH resolver), and returns redirects without
// following them.
func TestClient(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/admin", http.StatusTemporaryRedirect)
		}
	}))
	defer target.Close()
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	doh := egresstest.NewDoHServer(t, map[string][]string{"receiver.test": {"127.0.0.1"}}, map[string]string{"cname.test": "receiver.test"})

	guarded, err := NewClient(Config{ResolverURL: doh.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"receiver.test", "cname.test", "127.0.0.1"} {
		res, err := guarded.Get("http://" + host + ":" + port + "/")
		if err == nil {
			res.Body.Close()
		}
		if !errors.Is(err, ErrForbidden) {
			t.Fatalf("%s: %v, want ErrForbidden", host, err)
		}
	}
	if reached.Load() != 0 {
		t.Fatal("a guarded request reached the target")
	}

	open, err := NewClient(Config{AllowPrivate: true, ResolverURL: doh.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := open.Get("http://cname.test:" + port + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTemporaryRedirect || reached.Load() != 1 {
		t.Fatalf("status %d after %d requests: the redirect was followed", res.StatusCode, reached.Load())
	}
	if _, err := NewClient(Config{ResolverURL: "ftp://resolver.example"}); err == nil {
		t.Fatal("a non-http resolver URL was accepted")
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example.com/idn", "http://127.0.0.1:8080/", "http://[::ffff:10.0.0.1]/", "https://[fe80::1%25eth0]/",
		"https://user:pw@example.com/", "ftp://x/", "https://example.com:99999/", "http://0x7f.1/", "https://example.com/#f",
		"https://93.184.216.34/", "http://[fd00::1]:443/x?y=z", "//example.com", "https:///path",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, allow := range []bool{false, true} {
			if err := CheckURL(raw, allow); err != nil {
				continue
			}
			if len(raw) > MaxURL {
				t.Fatalf("accepted %d bytes", len(raw))
			}
			req, err := http.NewRequest(http.MethodPost, raw, nil)
			if err != nil {
				t.Fatalf("accepted %q that net/http cannot send: %v", raw, err)
			}
			u := req.URL
			if (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Hostname() == "" {
				t.Fatalf("accepted %q", raw)
			}
			if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !allow && !publicAddr(ip) {
				t.Fatalf("accepted private literal %q", raw)
			}
		}
	})
}

func FuzzParseDNSAnswer(f *testing.F) {
	q, _ := dnsQuery("hooks.example.com", dnsTypeA)
	resp := append([]byte{0, 0, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0}, q[12:]...)
	resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34)
	f.Add(resp)
	f.Add(append([]byte(nil), resp[:20]...))
	loop := append([]byte{0, 0, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, 0xc0, 12)
	f.Add(loop)
	f.Fuzz(func(t *testing.T, msg []byte) {
		ips, err := parseDNSAnswer(msg, "hooks.example.com", dnsTypeA)
		if err != nil && ips != nil {
			t.Fatal("addresses returned with an error")
		}
		for _, ip := range ips {
			if !ip.Is4() {
				t.Fatalf("A answer gave %v", ip)
			}
		}
	})
}
