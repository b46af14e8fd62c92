package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

// TestPasskeyAddedReachesGateway: the owner adds a passkey in Chromium,
// then signs the change with the passkey the paired gateway pinned; the
// gateway checks it and from then on accepts an approval made with the
// new passkey alone.
func TestPasskeyAddedReachesGateway(t *testing.T) {
	w := newWorld(t)
	b := newBrowser(t, w.base)

	step(t, "the owner signs up with a passkey and pairs a gateway that holds payments")
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
	up := &bank{}
	gwURL := pairedGateway(t, w, b, "acme", up)

	step(t, "the owner adds a passkey and signs the change for the gateway")
	b.open("/account")
	b.fill("Passkey name", "Phone")
	b.press("button", "Add passkey")
	b.waitFor(`document.querySelector("p.err") || [...document.querySelectorAll("[role=status], .done")].some(e => e.textContent.includes("Your gateways trust the change."))`, 20*time.Second)
	if msg := eval[string](b, `document.querySelector("p.err")?.textContent ?? ""`); msg != "" {
		t.Fatalf("adding a passkey failed: %s", msg)
	}
	b.shot("passkey-added-gateways")

	step(t, "a payment approved with the new passkey alone passes the gateway")
	status, answer := pay(t, gwURL, agent, `{"to":"bob","amount":"12.50"}`)
	if status != http.StatusForbidden || answer["code"] != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("the payment answered %d %v", status, answer)
	}
	id := answer["action_id"].(string)
	b.holdAdded()
	b.open("/actions")
	b.waitFor(`document.querySelector('article.action[data-id="`+id+`"]')`, 10*time.Second)
	b.press("button", "Approve POST /v1/payments")
	b.waitFor(`!document.querySelector('article.action[data-id="`+id+`"]') || document.querySelector("p.err")`, 10*time.Second)
	if msg := eval[string](b, `document.querySelector("p.err")?.textContent ?? ""`); msg != "" {
		t.Fatalf("approving failed: %s", msg)
	}
	status, answer = pay(t, gwURL, agent, `{"to":"bob","amount":"12.50"}`)
	if status != http.StatusOK {
		t.Fatalf("the payment approved with the new passkey answered %d %v", status, answer)
	}
	if got := up.received(); len(got) != 1 || !strings.Contains(got[0], "12.50") {
		t.Fatalf("the bank received %q", got)
	}
}
