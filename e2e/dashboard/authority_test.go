package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

// TestDashboardConnectionOnKeylessGateway: a gateway started without any
// service API key refuses, while unpaired, a connection it could not
// serve, naming the setting it lacks. Once its owner pairs it from the
// dashboard, a connection added there serves an approved agent within
// 2 s, with no restart: the gateway reads the feed and files claims on
// its pairing alone. An agent it files a claim for is served once the
// owner approves it in the dashboard. Unpaired again, it refuses keyless
// connections again.
func TestDashboardConnectionOnKeylessGateway(t *testing.T) {
	chromium(t)
	bin := buildGateway(t)
	const secret = "sk-e2e-keyless-5b2e9d0c"
	upstream := newUpstream(t, secret)
	w := startPairingWorld(t, controlplane.ProviderSQLite)
	approved, err := identity.New("agent-e2e")
	if err != nil {
		t.Fatal(err)
	}
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
	}
	w.post(t, "/v1/test/seed", fmt.Sprintf(`{"namespaces":["alice","agent-e2e"],"services":[{"slug":"weather","name":"Weather","owner":"alice"}],
		"claims":[{"namespace":"agent-e2e","service":"weather","public_key":%q,"status":"approved"}]}`, identity.FormatPublicKey(approved.PublicKey)), &seeded)

	key, _ := credvault.GenerateMasterKey()
	dataDir := t.TempDir()
	// No IDN_SERVICE_API_KEY of any kind, and the default claims poll
	// (10 s): what follows owes nothing to a short poll.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDN_SERVICE_API_KEY") {
			env = append(env, kv)
		}
	}
	env = append(env, "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode(), "GATEWAY_ADMIN_ACCESS_MODE=loopback",
		"IDN_REGISTRY_URL="+w.cpURL, "LOG_LEVEL=debug")
	serve, gwAddr, serveLog := serveGateway(t, bin, env)

	step(t, "the unpaired gateway refuses a connection it has no key for, naming the setting")
	refusesKeyless(t, bin, env, gwAddr, "weather", upstream, secret)

	b := newBrowser(t, w.base)
	if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: controlplane.SessionCookie,
		Value: seeded.Sessions["alice"], URL: w.base, HTTPOnly: new(true)}); err != nil {
		t.Fatal(err)
	}
	step(t, "pair the gateway from the dashboard")
	b.open("/gateways")
	b.press("button", "Pair gateway")
	b.waitFor(`document.getElementById("pairing-command").value !== ""`, 5*time.Second)
	command := eval[string](b, `document.getElementById("pairing-command").value`)
	m := regexp.MustCompile(`gateway pair --session-id (gps_[0-9a-f]+) --pair-code ([0-9A-Z]{8}) --namespace alice$`).FindStringSubmatch(command)
	if m == nil {
		t.Fatalf("the command shown is %q", command)
	}
	out := runGateway(t, bin, env, "pair", "--session-id", m[1], "--pair-code", m[2], "--namespace", "alice", "--daemon", "--name", "keyless-laptop")
	if !strings.Contains(out, "running in the background") {
		t.Fatalf("pair --daemon said %q", out)
	}
	t.Cleanup(func() { runGateway(t, bin, env, "pair", "--stop") })
	b.waitFor(`[...document.querySelectorAll("tr[data-gateway]")].some(r => r.textContent.includes("keyless-laptop") && r.textContent.includes("online"))`, 20*time.Second)

	step(t, "a service that is not the owner's is refused in the dashboard, where the slug was typed")
	b.press("link", "Manage keyless-laptop")
	b.waitFor(`location.pathname.startsWith("/gateways/gw_") && document.querySelector("#connections .summary")?.textContent.startsWith("No connections")`, 10*time.Second)
	b.fill("Connection id", "typo")
	b.fill("Service", "wether")
	b.fill("Base URL", upstream)
	b.fill("Secret", secret)
	b.press("button", "Add connection")
	if msg := b.errorText("Add connection"); !strings.Contains(msg, `no service "wether"`) {
		t.Fatalf("adding a connection for a service that does not exist showed %q", msg)
	}

	step(t, "a connection added in the dashboard serves the approved agent within 2 s, no restart")
	b.fill("Connection id", "weather")
	b.fill("Name", "Weather")
	b.fill("Service", "weather")
	b.fill("Base URL", upstream)
	b.fill("Secret", secret)
	b.press("button", "Add connection")
	b.waitFor(`document.querySelector("tr[data-connection=weather]")`, 10*time.Second)
	served := servedWithin(t, 5*time.Second, gwAddr, approved)
	t.Logf("the approved agent was served %v after the dashboard showed the new connection", served.Round(time.Millisecond))
	if served > 2*time.Second {
		t.Fatalf("the approved agent was served %v after the connection was added, want at most 2 s", served)
	}
	if err := serve.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the gateway started before the pairing is not running any more: %v", err)
	}

	step(t, "the gateway files a new agent's claim on its pairing; the owner approves it in the dashboard")
	// An agent of alice's own namespace: she approves its claim.
	newcomer, err := identity.New("alice")
	if err != nil {
		t.Fatal(err)
	}
	status, body := agentThrough(t, gwAddr, newcomer)
	if status != http.StatusForbidden || !strings.Contains(body, "AUTH_CLAIM_REQUIRED") || !strings.Contains(body, `"claim_id"`) {
		t.Fatalf("the unknown agent's request answered %d %s, want 403 AUTH_CLAIM_REQUIRED with a filed claim", status, body)
	}
	b.open("/claims?status=pending")
	b.waitFor(`document.querySelector("tr[data-status=pending]")`, 10*time.Second)
	if row := eval[string](b, `document.querySelector("tr[data-status=pending]").innerText`); !strings.Contains(row, identity.KeyFragment(newcomer.PublicKey)) {
		t.Fatalf("the pending row %q is not the new agent's", row)
	}
	b.press("button", "Approve ")
	b.waitFor(`!document.querySelector("tr[data-status=pending]")`, 5*time.Second)
	took := servedWithin(t, 10*time.Second, gwAddr, newcomer)
	t.Logf("the newly approved agent was served %v after the approval", took.Round(time.Millisecond))
	// The agent's misses ask for early refreshes, at most one per service
	// every 2 s: that bounds it here, short of a pushed change.
	if took > 2500*time.Millisecond {
		t.Fatalf("the newly approved agent was served %v after the approval, want about 2 s at most", took)
	}

	logs, _ := os.ReadFile(serveLog)
	if strings.Contains(string(logs), "API_KEY_INVALID") || strings.Contains(string(logs), "no service API key") {
		t.Errorf("the paired gateway's log reports a missing or refused key:\n%s", logs)
	}

	step(t, "unpaired from the dashboard, the gateway refuses keyless connections again")
	b.open("/gateways")
	b.tabTo("Unpair keyless-laptop")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Unpair")
	b.waitFor(`!document.querySelector("tr[data-gateway]")`, 10*time.Second)
	eventually(t, 15*time.Second, "the pair process to exit after unpairing", func() bool {
		return strings.Contains(runGateway(t, bin, env, "pair", "--status"), "running: no")
	})
	if status := runGateway(t, bin, env, "pair", "--status"); !strings.Contains(status, "paired: no") {
		t.Fatalf("pair --status after unpairing:\n%s", status)
	}
	refusesKeyless(t, bin, env, gwAddr, "weather-2", upstream, secret)
}

// refusesKeyless checks that the gateway's admin API refuses a connection
// with id for the weather service, for want of a service API key, and
// names the variable that would supply it.
func refusesKeyless(t *testing.T, bin string, env []string, gwAddr, id, upstream, secret string) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"service":"weather","base_url":%q,"auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":%q}}`, id, upstream, secret)
	req, _ := http.NewRequest("POST", "http://"+gwAddr+"/api/admin/connections", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(runGateway(t, bin, env, "admin-token")))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var refusal struct {
		Code, Error string
		Settings    []string
	}
	json.NewDecoder(res.Body).Decode(&refusal)
	want := "IDN_SERVICE_API_KEY_" + strings.ToUpper(strings.ReplaceAll(id, "-", "_"))
	if res.StatusCode != http.StatusConflict || refusal.Code != "SERVICE_API_KEY_MISSING" ||
		!strings.Contains(refusal.Error, want) || len(refusal.Settings) != 2 || refusal.Settings[0] != want {
		t.Fatalf("keyless connection %s on an unpaired gateway: %d %+v", id, res.StatusCode, refusal)
	}
}

// servedWithin polls the agent's request through the gateway until it is
// answered 200 and returns how long that took; past limit it fails.
func servedWithin(t *testing.T, limit time.Duration, gwAddr string, agent *identity.Identity) time.Duration {
	t.Helper()
	start := time.Now()
	var status int
	var body string
	for time.Since(start) < limit {
		if status, body = agentThrough(t, gwAddr, agent); status == http.StatusOK {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the agent's request still answers %d %s after %v", status, body, limit)
	return 0
}
