package controlplane

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/controlplane/internal/webhooks/egress/egresstest"
)

// TestSSRFGuard: every private or special-use target is refused when
// private targets are not allowed, whether named by an address literal
// (refused when saved), by a host name that resolves to one (refused when
// dialled, through the configured DoH resolver), or by a redirect (never
// followed). Package egress tests the dialled addresses themselves.
func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	_, port, _ := net.SplitHostPort(rc.ts.Listener.Addr().String())
	doh := egresstest.NewDoHServer(t, map[string][]string{
		"internal.test": {"10.0.0.7"},
		"receiver.test": {"127.0.0.1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"ula.test":      {"fd00::1"},
		"metadata.test": {"169.254.169.254"},
	}, map[string]string{"cname.test": "receiver.test"})
	guarded := withWebhooks(func(c *WebhookConfig) { c.InsecureAllowPrivateTargets = false; c.DNSResolverURL = doh.URL })

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
			withWebhooks(func(c *WebhookConfig) { c.DNSResolverURL = doh.URL }))
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
