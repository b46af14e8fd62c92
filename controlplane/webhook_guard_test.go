package controlplane

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// dohServer is an RFC 8484 DNS-over-HTTPS test server answering A and AAAA
// queries from a table, with CNAMEs. It answers only POSTed
// application/dns-message queries.
type dohServer struct {
	ts      *httptest.Server
	a       map[string][]string // name → addresses (IPv4 answer A, IPv6 answer AAAA)
	cname   map[string]string
	queries atomic.Int64
}

func newDoHServer(t *testing.T, a map[string][]string, cname map[string]string) *dohServer {
	d := &dohServer{a: a, cname: cname}
	d.ts = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.ts.Close)
	return d
}

func encodeName(name string) []byte {
	var b []byte
	for _, l := range strings.Split(name, ".") {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

func (d *dohServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/dns-message" {
		http.Error(w, "want RFC 8484 POST", http.StatusBadRequest)
		return
	}
	d.queries.Add(1)
	q, _ := io.ReadAll(r.Body)
	name, off, err := readDNSName(q, 12)
	if err != nil {
		http.Error(w, "bad query", http.StatusBadRequest)
		return
	}
	qtype := binary.BigEndian.Uint16(q[off:])
	question := q[12 : off+4]
	var answers []byte
	n := 0
	rr := func(owner []byte, typ uint16, data []byte) {
		answers = append(answers, owner...)
		answers = binary.BigEndian.AppendUint16(answers, typ)
		answers = binary.BigEndian.AppendUint16(answers, dnsClassIN)
		answers = binary.BigEndian.AppendUint32(answers, 60)
		answers = binary.BigEndian.AppendUint16(answers, uint16(len(data)))
		answers = append(answers, data...)
		n++
	}
	owner := []byte{0xc0, 12} // compressed pointer to the question name
	if target, ok := d.cname[name]; ok {
		rr(owner, dnsTypeCNAME, encodeName(target))
		name, owner = target, encodeName(target)
	}
	for _, s := range d.a[name] {
		ip := netip.MustParseAddr(s)
		if ip.Is4() && qtype == dnsTypeA {
			b := ip.As4()
			rr(owner, dnsTypeA, b[:])
		} else if ip.Is6() && qtype == dnsTypeAAAA {
			b := ip.As16()
			rr(owner, dnsTypeAAAA, b[:])
		}
	}
	msg := []byte{q[0], q[1], 0x81, 0x80, 0, 1, byte(n >> 8), byte(n), 0, 0, 0, 0}
	msg = append(append(msg, question...), answers...)
	w.Header().Set("Content-Type", "application/dns-message")
	w.Write(msg)
}

func TestDoHResolver(t *testing.T) {
	t.Parallel()
	doh := newDoHServer(t, map[string][]string{
		"hooks.example.com": {"93.184.216.34", "2606:4700::1"},
		"edge.example.net":  {"203.0.113.50"},
	}, map[string]string{"alias.example.com": "edge.example.net"})
	r, err := newDoHResolver(doh.ts.URL+"/dns-query", 5*time.Second)
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
	if _, err := r.lookup(context.Background(), "missing.example.com"); !errors.Is(err, errResolve) {
		t.Fatalf("missing name: %v", err)
	}
	if doh.queries.Load() != 6 {
		t.Fatalf("DoH server saw %d queries, want 6 (A and AAAA per lookup)", doh.queries.Load())
	}
}

// TestSSRFGuard: every private or special-use target is refused when
// private targets are not allowed, whether named by an address literal
// (refused when saved, and again when dialled), by a host name that
// resolves to one (refused when dialled, through the configured DoH
// resolver), or by a redirect (never followed).
func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	_, port, _ := net.SplitHostPort(rc.ts.Listener.Addr().String())
	doh := newDoHServer(t, map[string][]string{
		"internal.test": {"10.0.0.7"},
		"receiver.test": {"127.0.0.1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"ula.test":      {"fd00::1"},
		"metadata.test": {"169.254.169.254"},
	}, map[string]string{"cname.test": "receiver.test"})
	guarded := withWebhooks(func(c *WebhookConfig) { c.AllowPrivateTargets = false; c.DNSResolverURL = doh.ts.URL })

	t.Run("private literals and localhost names refused when saved", func(t *testing.T) {
		e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), guarded)
		owner, _ := claimWorld(e)
		base := "/v1/services/" + e.serviceID(owner) + "/webhooks"
		open := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), withWebhooks(func(c *WebhookConfig) { c.MaxPerService = 100 }))
		openOwner, _ := claimWorld(open)
		openBase := "/v1/services/" + open.serviceID(openOwner) + "/webhooks"
		for name, u := range map[string]string{
			"loopback":                  "http://127.0.0.1:" + port + "/",
			"RFC 1918 10/8":             "http://10.0.0.1/",
			"RFC 1918 172.16/12":        "http://172.16.0.1/",
			"RFC 1918 192.168/16":       "https://192.168.1.1/",
			"cloud metadata":            "http://169.254.169.254/latest/meta-data/",
			"CGNAT":                     "http://100.64.0.1/",
			"unspecified":               "http://0.0.0.0/",
			"IPv6 loopback":             "http://[::1]:" + port + "/",
			"IPv6 ULA":                  "http://[fd00::1]/",
			"IPv6 link-local":           "http://[fe80::1]/",
			"IPv4-mapped IPv6 loopback": "http://[::ffff:127.0.0.1]/",
			"IPv4-mapped IPv6 private":  "http://[::ffff:10.0.0.1]/",
			"IPv4-mapped IPv6 hex form": "http://[::ffff:7f00:1]/",
			"localhost name":            "http://localhost:" + port + "/",
			"localhost subdomain":       "http://api.localhost./",
		} {
			t.Run(name, func(t *testing.T) {
				e.do("POST", base, map[string]any{"url": u}, owner).want(t, 400, "WEBHOOK_URL_FORBIDDEN")
				open.do("POST", openBase, map[string]any{"url": u}, openOwner).want(t, 201, "")
			})
		}
		e.do("POST", base, map[string]any{"url": "https://93.184.216.34/hook"}, owner).want(t, 201, "")
	})

	t.Run("dialled addresses", func(t *testing.T) {
		for _, addr := range []string{
			"127.0.0.1:" + port, "[::1]:" + port, "[::ffff:127.0.0.1]:" + port, "10.0.0.1:80", "192.168.1.1:80",
			"169.254.169.254:80", "[fd00::1]:80", "[fe80::1]:80", "100.64.0.1:80", "0.0.0.0:" + port,
		} {
			t.Run(addr, func(t *testing.T) {
				g := newTargetGuard(false, nil, time.Second)
				if c, err := g.DialContext(context.Background(), "tcp", addr); !errors.Is(err, errForbiddenTarget) {
					if c != nil {
						c.Close()
					}
					t.Fatalf("dial %s: %v, want refused", addr, err)
				}
			})
		}
		// The receiver is reachable at all: the guard is what refused it.
		c, err := newTargetGuard(true, nil, time.Second).DialContext(context.Background(), "tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Fatalf("allow-private dial: %v", err)
		}
		c.Close()
	})

	for _, tc := range []struct{ name, host string }{
		{"hostname resolving to loopback (DNS rebinding)", "receiver.test"},
		{"CNAME to a loopback name", "cname.test"},
		{"hostname resolving to IPv4-mapped IPv6 loopback", "mapped.test"},
		{"hostname resolving to RFC 1918", "internal.test"},
		{"hostname resolving to IPv6 ULA", "ula.test"},
		{"hostname resolving to cloud metadata", "metadata.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), guarded)
			whID, secret, _, id, owner := approvedDelivery(e, "http://"+tc.host+":"+port+"/hook")
			rc.setSecret(secret)
			if n := e.deliverDue(); n != 1 {
				t.Fatalf("attempted %d", n)
			}
			if got, _ := rc.counts(); got[id] != 0 {
				t.Fatal("the guarded delivery reached the receiver")
			}
			d := e.do("GET", "/v1/services/"+e.serviceID(owner)+"/webhooks/"+whID+"/deliveries", nil, owner).want(t, 200, "").json(t)
			last := d["deliveries"].([]any)[0].(map[string]any)["last_error"].(string)
			if !strings.Contains(last, "private or special-use") || strings.Contains(last, "10.0.0.7") {
				t.Fatalf("last_error = %q", last)
			}
		})
	}

	t.Run("allow-private reaches the same names", func(t *testing.T) {
		e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)),
			withWebhooks(func(c *WebhookConfig) { c.DNSResolverURL = doh.ts.URL }))
		_, secret, _, id, _ := approvedDelivery(e, "http://cname.test:"+port+"/hook")
		rc.setSecret(secret)
		e.deliverDue()
		if got, _ := rc.counts(); got[id] != 1 {
			t.Fatalf("receiver got %v; DoH-resolved delivery with private targets allowed should arrive", got)
		}
	})

	t.Run("redirect to a private address is not followed", func(t *testing.T) {
		var inner atomic.Int64
		internal := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { inner.Add(1) }))
		defer internal.Close()
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, internal.URL+"/admin", http.StatusTemporaryRedirect)
		}))
		defer redirector.Close()
		// The first hop is on loopback too, so this row allows private
		// targets: the redirect is refused regardless.
		e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), withWebhooks(nil))
		whID, _, _, _, owner := approvedDelivery(e, redirector.URL)
		e.deliverDue()
		if inner.Load() != 0 {
			t.Fatal("redirect followed")
		}
		d := e.do("GET", "/v1/services/"+e.serviceID(owner)+"/webhooks/"+whID+"/deliveries", nil, owner).want(t, 200, "").json(t)
		rec := d["deliveries"].([]any)[0].(map[string]any)
		if rec["last_status_code"].(float64) != 307 || !strings.Contains(rec["last_error"].(string), "redirect") || rec["status"] != "pending" {
			t.Fatalf("delivery = %v", rec)
		}
	})
}

func FuzzValidateWebhookURL(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example.com/idn", "http://127.0.0.1:8080/", "http://[::ffff:10.0.0.1]/", "https://[fe80::1%25eth0]/",
		"https://user:pw@example.com/", "ftp://x/", "https://example.com:99999/", "http://0x7f.1/", "https://example.com/#f",
		"https://93.184.216.34/", "http://[fd00::1]:443/x?y=z", "//example.com", "https:///path",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, allow := range []bool{false, true} {
			if err := validateWebhookURL(raw, allow); err != nil {
				continue
			}
			if len(raw) > maxWebhookURL {
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
