package dashboard_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

// dashboardGateway is the owner alice in Chromium on the page of a gateway
// she paired from the dashboard. The gateway serves service slug, on
// which agent holds an approved claim.
type dashboardGateway struct {
	w       *pairingWorld
	b       *browser
	audit   func(name string) // the accessibility checks, when axe is there
	bin     string            // the gateway binary
	env     []string          // the gateway's environment
	addr    string            // where it serves
	logPath string            // its log file
}

// pairFromDashboard seeds alice, agent's namespace and the service slug
// (named name), starts a gateway with extraEnv, pairs it from the
// dashboard as gateway, and opens its page.
func pairFromDashboard(t *testing.T, agent *identity.Identity, slug, name, gateway string, extraEnv ...string) *dashboardGateway {
	t.Helper()
	p := &dashboardGateway{bin: buildGateway(t)}
	w := startPairingWorld(t, controlplane.ProviderSQLite)
	p.w = w
	var seeded struct {
		APIKeys  map[string]string `json:"api_keys"`
		Sessions map[string]string `json:"sessions"`
	}
	w.post(t, "/v1/test/seed", fmt.Sprintf(`{"namespaces":["alice",%q],"services":[{"slug":%q,"name":%q,"owner":"alice"}],
		"claims":[{"namespace":%[1]q,"service":%[2]q,"public_key":%[4]q,"status":"approved"}]}`,
		agent.Namespace, slug, name, identity.FormatPublicKey(agent.PublicKey)), &seeded)
	key, _ := credvault.GenerateMasterKey()
	p.env = append(os.Environ(), "GATEWAY_DATA_DIR="+t.TempDir(), "GATEWAY_MASTER_KEY="+key.Encode(), "GATEWAY_ADMIN_ACCESS_MODE=loopback",
		"IDN_REGISTRY_URL="+w.cpURL, "IDN_SERVICE_API_KEY="+seeded.APIKeys[slug],
		"GATEWAY_CLAIMS_CACHE_TTL_SECONDS=2", "GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS=1")
	p.env = append(p.env, extraEnv...)
	_, p.addr, p.logPath = serveGateway(t, p.bin, p.env)

	b := newBrowser(t, w.base)
	p.b, p.audit = b, func(string) {}
	if os.Getenv("IDN_NODE_MODULES") != "" || os.Getenv("CI") == "true" {
		axe := axeSource(t)
		p.audit = func(name string) { b.audit(name, axe) }
	}
	if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: controlplane.SessionCookie,
		Value: seeded.Sessions["alice"], URL: w.base, HTTPOnly: new(true)}); err != nil {
		t.Fatal(err)
	}
	step(t, "pair a gateway")
	b.open("/gateways")
	b.press("button", "Pair gateway")
	b.waitFor(`document.getElementById("pairing-command").value !== ""`, 5*time.Second)
	m := regexp.MustCompile(`--session-id (gps_[0-9a-f]+) --pair-code ([0-9A-Z]{8})`).FindStringSubmatch(eval[string](b, `document.getElementById("pairing-command").value`))
	if m == nil {
		t.Fatal("no pairing command shown")
	}
	runGateway(t, p.bin, p.env, "pair", "--session-id", m[1], "--pair-code", m[2], "--namespace", "alice", "--daemon", "--name", gateway)
	t.Cleanup(func() { runGateway(t, p.bin, p.env, "pair", "--stop") })
	b.waitFor(`[...document.querySelectorAll("tr[data-gateway]")].some(r => r.textContent.includes("online"))`, 20*time.Second)
	b.press("link", "Manage "+gateway)
	b.waitFor(`document.querySelector("#connections .summary")?.textContent.startsWith("No connections")`, 10*time.Second)
	return p
}
