package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/pairing"
)

// bank is an upstream that records the payments it is sent.
type bank struct {
	mu       sync.Mutex
	payments []string
}

func (k *bank) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	k.mu.Lock()
	k.payments = append(k.payments, r.Method+" "+r.URL.Path+" "+string(body))
	k.mu.Unlock()
	fmt.Fprintln(w, `{"paid":true}`)
}

func (k *bank) received() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.payments...)
}

// pairedGateway runs a whole gateway (package gateway) paired with the
// owner signed in to b, as `gateway serve` beside `gateway pair` does,
// with a connection "bank" whose payments need the owner's approval.
func pairedGateway(t *testing.T, w *world, b *browser, ns string, up http.Handler) string {
	t.Helper()
	docs := docsServer(t, "docs-token")
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	key, _ := credvault.GenerateMasterKey()
	dir := t.TempDir()
	gw, err := gateway.New(gateway.Config{DataDir: dir, MasterKey: key, Admin: admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: w.cpURL, Claims: claimcache.Options{TTL: 2 * time.Second, RefreshInterval: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	p := b.apiCall("POST", "/v1/gateways/pairings", "")
	client, err := pairing.New(pairing.Config{ControlPlaneURL: w.cpURL, Identity: gw.Identity(), Admin: gw.Admin(), DataDir: dir,
		MasterKey: key, Name: "bank-laptop"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	paired := make(chan error, 1)
	go func() {
		paired <- client.Run(ctx, &pairing.Pairing{SessionID: p["session_id"].(string), Code: p["pair_code"].(string), Namespace: ns})
	}()
	eventually(t, 10*time.Second, "the gateway to pair", func() bool { _, ok := client.State(); return ok })
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "bank", Service: "bank", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", ApprovalRoutes: []string{"POST /v1/payments"}},
		map[string]string{"token": "bank-upstream-token"}); err != nil {
		t.Fatal(err)
	}
	// An MCP connection of the same service whose publishing waits too.
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "docs", Service: "bank", Protocol: credvault.ProtocolMCP, BaseURL: docs,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", ApprovalTools: []string{"docs.publish"},
		Extensions: mcpproxy.Settings{Endpoint: "/mcp"}.Members()}, map[string]string{"token": "docs-token"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln := freePort(t)
	srv := gateway.NewServer(openapicheck.Watch(t, gw))
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { cancel(); <-paired; srv.Close(); <-served; gw.Close() })
	ready, cancelReady := context.WithTimeout(ctx, 15*time.Second)
	defer cancelReady()
	if err := gw.Up(ready); err != nil {
		t.Fatal(err)
	}
	return "http://" + ln.Addr().String()
}

// pay sends the agent's signed payment through the gateway and returns
// the status and the decoded answer.
func pay(t *testing.T, gwURL string, agent *identity.Identity, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", gwURL+"/proxy/bank/v1/payments", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if err := agent.Sign(req, identity.SignOptions{Subject: "finance@acme.example"}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// callTool calls an MCP tool of the docs connection through the gateway's
// tools route and returns the status and the decoded answer.
func callTool(t *testing.T, gwURL string, agent *identity.Identity, tool string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", gwURL+"/mcp/docs/tools/"+tool+"/call", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	if err := agent.Sign(req, identity.SignOptions{Subject: "finance@acme.example"}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestActionApprovedWithPasskey: an agent's payment through a paired
// gateway is held; the owner reads it in full on the Actions page and
// approves it with a passkey in Chromium; the agent's retry is paid once,
// and only that call.
func TestActionApprovedWithPasskey(t *testing.T) {
	axe := axeSource(t)
	w := newWorld(t)
	b := newBrowser(t, w.base)

	step(t, "the owner signs up with a passkey and makes the bank service")
	b.open("/signup")
	b.fill("Namespace", "acme")
	b.fill("Passkey name", "Laptop")
	b.press("button", "Sign up")
	b.waitFor(`location.pathname === "/claims"`, 10*time.Second)
	b.keepPasskeys()
	b.apiCall("POST", "/v1/services", `{"name":"Bank","slug":"bank","service_endpoint":"https://bank.example"}`)
	agent, err := identity.New("agent-e2e")
	if err != nil {
		t.Fatal(err)
	}
	var seeded map[string]any
	w.post(t, "/v1/test/seed", fmt.Sprintf(`{"namespaces":["agent-e2e"],
		"claims":[{"namespace":"agent-e2e","service":"bank","public_key":%q,"status":"approved"}]}`, identity.FormatPublicKey(agent.PublicKey)), &seeded)

	step(t, "the paired gateway holds the payment and files an action request")
	up := &bank{}
	gwURL := pairedGateway(t, w, b, "acme", up)
	b.open("/actions")
	eval[bool](b, `window.sameDocument = true`)
	const payment = `{"to":"DE89 3704 0044 0532 0130 00","amount":"1250.00","currency":"EUR","memo":"invoice 2026-118"}`
	status, answer := pay(t, gwURL, agent, payment)
	if status != http.StatusForbidden || answer["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || answer["action_id"] == nil || answer["expires_at"] == nil {
		t.Fatalf("the first payment answered %d %v", status, answer)
	}
	if len(up.received()) != 0 {
		t.Fatal("the held payment reached the bank")
	}
	actionID := answer["action_id"].(string)

	step(t, "the Actions page shows it, arguments whole, and says so")
	took := b.waitFor(`document.querySelector('article.action[data-id="`+actionID+`"]')`, 10*time.Second)
	t.Logf("the action appeared %v after the gateway filed it", took.Round(time.Millisecond))
	b.said("A new action is waiting for your approval.")
	if !eval[bool](b, `window.sameDocument === true`) {
		t.Fatal("the actions page reloaded instead of updating itself")
	}
	card := eval[string](b, `document.querySelector("article.action").innerText`)
	for _, want := range []string{"POST /v1/payments", "DE89 3704 0044 0532 0130 00", "1250.00", "invoice 2026-118", "finance@acme.example",
		identity.KeyFragment(agent.PublicKey), "bank"} {
		if !strings.Contains(card, want) {
			t.Errorf("the action card %q lacks %q", card, want)
		}
	}
	b.shot("actions-pending")
	b.audit("actions", axe)
	b.checkFocusRings("actions")

	step(t, "the owner approves with a passkey; the agent's retry is paid, once")
	b.press("button", "Approve POST /v1/payments")
	b.waitFor(`!document.querySelector("article.action")`, 10*time.Second)
	b.said("POST /v1/payments by " + identity.KeyFragment(agent.PublicKey) + " approved.")
	b.shot("actions-approved")
	status, answer = pay(t, gwURL, agent, payment)
	if status != http.StatusOK {
		t.Fatalf("the approved payment answered %d %v", status, answer)
	}
	if got := up.received(); len(got) != 1 || !strings.Contains(got[0], "invoice 2026-118") {
		t.Fatalf("the bank received %q", got)
	}

	step(t, "the same approval does not pay other arguments, or the same call twice")
	status, answer = pay(t, gwURL, agent, strings.Replace(payment, "1250.00", "9250.00", 1))
	if status != http.StatusForbidden || answer["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("a payment with other arguments answered %d %v", status, answer)
	}
	status, answer = pay(t, gwURL, agent, payment)
	if status != http.StatusForbidden || answer["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || answer["action_id"] == actionID {
		t.Fatalf("the approved payment sent again answered %d %v", status, answer)
	}
	if got := up.received(); len(got) != 1 {
		t.Fatalf("the bank received %d payments, want 1", len(got))
	}

	step(t, "an MCP tool call is held the same way and passes once approved")
	if status, answer := callTool(t, gwURL, agent, "docs.search"); status != http.StatusOK {
		t.Fatalf("a tool without a rule answered %d %v", status, answer)
	}
	status, answer = callTool(t, gwURL, agent, "docs.publish")
	if status != http.StatusForbidden || answer["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" || answer["action_id"] == nil {
		t.Fatalf("the held tool call answered %d %v", status, answer)
	}
	tool := answer["action_id"].(string)
	b.waitFor(`document.querySelector('article.action[data-id="`+tool+`"]')`, 10*time.Second)
	if card := eval[string](b, `document.querySelector('article.action[data-id="`+tool+`"]').innerText`); !strings.Contains(card, "tool docs.publish") {
		t.Fatalf("the tool's action card reads %q", card)
	}
	b.press("button", "Approve tool docs.publish")
	b.waitFor(`!document.querySelector('article.action[data-id="`+tool+`"]')`, 10*time.Second)
	if status, answer := callTool(t, gwURL, agent, "docs.publish"); status != http.StatusOK {
		t.Fatalf("the approved tool call answered %d %v", status, answer)
	}
	_, answer = pay(t, gwURL, agent, payment)

	step(t, "a denied action ends the wait")
	b.waitFor(`document.querySelectorAll("article.action").length === 2`, 10*time.Second)
	second := answer["action_id"].(string)
	b.apiCall("POST", "/v1/actions/"+second+"/deny", "")
	status, answer = pay(t, gwURL, agent, payment)
	if status != http.StatusForbidden || answer["code"] != "AUTH_ACTION_DENIED" || answer["action_id"] != second {
		t.Fatalf("the denied payment answered %d %v", status, answer)
	}
}
