package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idnhq/idn/identity"
)

// TestGatewayApprovalRules: the owner sets a connection's approval rules
// in the dashboard's forms: the connection's routes and a subject's own,
// the gateway's reasons shown for a malformed one. The gateway then holds
// that subject's call for the owner's passkey. Editing adds a subject's
// rule; removing a rule is refused by the gateway (ADMIN_TOKEN_REQUIRED)
// and the form says why. The MCP protocol asks for tools instead. The
// page with the rules in its form passes the accessibility checks.
func TestGatewayApprovalRules(t *testing.T) {
	chromium(t)
	const token = "bank-e2e-token-5c2e81b0"
	upstream := newUpstream(t, token)
	agent, err := identity.New("agent-bank")
	if err != nil {
		t.Fatal(err)
	}
	p := pairFromDashboard(t, agent, "bank", "Bank", "approvals-laptop")
	b, audit, gwAddr := p.b, p.audit, p.addr
	choose := func(id, value string) {
		t.Helper()
		eval[bool](b, fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, id, value))
	}

	step(t, "an MCP connection asks for tools, an HTTP one for routes")
	choose("conn-protocol", "mcp")
	b.waitFor(`document.getElementById("conn-approval-routes").closest(".field").hidden && !document.getElementById("conn-approval-tools").closest(".field").hidden`, 2*time.Second)
	choose("conn-protocol", "http")
	b.waitFor(`!document.getElementById("conn-approval-routes").closest(".field").hidden`, 2*time.Second)

	step(t, "a malformed subject's route is refused by the gateway, with its reason")
	b.fill("Connection id", "bank")
	b.fill("Name", "Bank")
	b.fill("Service", "bank")
	b.fill("Base URL", upstream)
	b.fill("Routes (optional)", "POST /v1/payments, DELETE /v1/accounts/*")
	b.press("button", "Add subject rule")
	b.wantFocus("Add subject rule", "")
	if got := eval[string](b, `document.activeElement.name`); got != "approval_subject" {
		t.Fatalf("after Add subject rule the focus is on %q, not the new subject", got)
	}
	b.fill("Routes (one a line)", "transfers")
	b.fill("Secret", token)
	b.press("button", "Add connection")
	if msg := b.errorText("Add connection"); !strings.HasPrefix(msg, "Subject rule 1 needs a subject.") {
		t.Fatalf("a subject rule without a subject: %q", msg)
	}
	b.fill("Held subject (idn-subject)", "alice")
	b.press("button", "Add connection")
	b.waitFor(`[...document.querySelectorAll("p.err")].some(p => p.textContent.includes("VALIDATION_ERROR"))`, 10*time.Second)
	if msg := b.errorText("Add connection"); !strings.Contains(msg, `Approval_subjects: subject "alice": route "transfers" must be "METHOD /path-glob"`) {
		t.Fatalf("a malformed route: %q", msg)
	}
	b.fill("Routes (one a line)", "POST /v1/transfers")
	b.saveShot("gateway-approval-rules", false)
	audit("a11y-gateway-approval-rules")
	b.press("button", "Add connection")
	b.waitFor(`document.querySelector("tr[data-connection=bank]")`, 10*time.Second)
	if eval[int](b, `document.querySelectorAll("[data-approval-subject]").length`) != 0 {
		t.Fatal("the form kept the added connection's subject rules")
	}
	conn := rpcResult(t, b, "connections.get", `{"id":"bank"}`)
	if fmt.Sprint(conn["approval_routes"]) != "[POST /v1/payments DELETE /v1/accounts/*]" ||
		fmt.Sprint(conn["approval_subjects"]) != "map[alice:map[approval_routes:[POST /v1/transfers]]]" {
		t.Fatalf("the stored connection: %v", conn)
	}

	step(t, "the gateway holds alice's transfer, not bob's")
	held := func(subject string) (int, string) {
		return agentAs(t, gwAddr, agent, subject, "POST", "/proxy/bank/v1/transfers", `{"to":"carol","amount":5}`)
	}
	eventually(t, 20*time.Second, "bob's transfer through the gateway", func() bool { status, _ := held("bob"); return status == 200 })
	if status, body := held("Alice"); status != 403 || !strings.Contains(body, "AUTH_ACTION_APPROVAL_REQUIRED") {
		t.Fatalf("alice's transfer: %d %s", status, body)
	}

	step(t, "editing adds a subject's rule")
	b.press("button", "Edit Bank")
	b.waitFor(`document.getElementById("edit-connection").open`, 5*time.Second)
	if got := eval[string](b, `[document.getElementById("edit-approval-routes").value, ...[...document.querySelectorAll("#edit-connection [data-approval-subject]")].map(r => [...r.querySelectorAll("input, textarea")].map(e => e.value).join("="))].join(" | ")`); got != "POST /v1/payments\nDELETE /v1/accounts/* | alice=POST /v1/transfers" {
		t.Fatalf("the edit dialog shows %q", got)
	}
	b.press("button", "Add subject rule")
	b.do(chromedp.KeyEvent("bob"))
	eval[bool](b, `([...document.querySelectorAll("#edit-connection [name=approval_subject_rules]")].at(-1).value = "POST /v1/transfers", true)`)
	b.saveShot("gateway-approval-rules-edit", false)
	b.press("button", "Save connection")
	b.waitFor(`!document.getElementById("edit-connection").open`, 10*time.Second)
	if conn := rpcResult(t, b, "connections.get", `{"id":"bank"}`); fmt.Sprint(conn["approval_subjects"]) != "map[alice:map[approval_routes:[POST /v1/transfers]] bob:map[approval_routes:[POST /v1/transfers]]]" {
		t.Fatalf("after adding bob's rule: %v", conn["approval_subjects"])
	}

	step(t, "removing a rule needs the gateway's admin token, and the form says so")
	b.press("button", "Edit Bank")
	b.waitFor(`document.getElementById("edit-connection").open`, 5*time.Second)
	if note := eval[string](b, `document.querySelector("#edit-connection fieldset.approvals .note").textContent`); !strings.Contains(note, "Removing one, or a subject's, needs the gateway's admin token") {
		t.Fatalf("the edit dialog's note: %q", note)
	}
	eval[bool](b, `(document.getElementById("edit-approval-routes").value = "POST /v1/payments", true)`)
	b.press("button", "Save connection")
	if msg := b.errorText("Save connection"); !strings.Contains(msg, "Removing approval_routes lifts a hold only the owner's passkey may release") || !strings.Contains(msg, "(ADMIN_TOKEN_REQUIRED)") {
		t.Fatalf("removing a route: %q", msg)
	}
	b.saveShot("gateway-approval-rules-refused", false)
	if conn := rpcResult(t, b, "connections.get", `{"id":"bank"}`); fmt.Sprint(conn["approval_routes"]) != "[POST /v1/payments DELETE /v1/accounts/*]" {
		t.Fatalf("the refused change was stored: %v", conn["approval_routes"])
	}
}

// agentAs sends the agent's signed request through the gateway as
// subject and returns the status and body.
func agentAs(t *testing.T, gwAddr string, agent *identity.Identity, subject, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+gwAddr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := agent.Sign(req, identity.SignOptions{Subject: subject}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}
