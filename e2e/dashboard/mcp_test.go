package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/identity"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docsServer is the MCP Go SDK's own server at /mcp, with tools that
// carry hints, answering only requests with the bearer token; every
// other path is 404.
func docsServer(t *testing.T, token string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "docs-server", Version: "2.4.0"}, nil)
	yes, no := true, false
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "docs.search", Title: "Search the docs", Description: "Finds pages that match a query.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}}, noop)
	mcp.AddTool(s, &mcp.Tool{Name: "docs.delete", Description: "Deletes a page for good.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true}}, noop)
	mcp.AddTool(s, &mcp.Tool{Name: "docs.publish", Description: "Publishes a draft on the public site.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}}, noop)
	mux := http.NewServeMux()
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestGatewayMCPConnection manages an MCP connection of a paired gateway
// from the dashboard: created with its endpoint, transport and tool
// policy (allow and deny lists, a subject's policy), tested with an MCP
// handshake that names the server (and, pointed at a wrong endpoint,
// says what failed), its tools discovered and listed with their
// descriptions and hints, and its policy edited. An agent's tool list
// through the gateway shows the policy in force. The page, with the MCP
// fields and the tools list, passes the accessibility checks.
func TestGatewayMCPConnection(t *testing.T) {
	chromium(t)
	const token = "mcp-e2e-token-8a41c7d2"
	upstream := docsServer(t, token)
	agent, err := identity.New("agent-mcp")
	if err != nil {
		t.Fatal(err)
	}
	p := pairFromDashboard(t, agent, "docs", "Docs", "mcp-laptop", "LOG_LEVEL=debug")
	w, b, audit, gwAddr, serveLog := p.w, p.b, p.audit, p.addr, p.logPath

	step(t, "the MCP fields show for the MCP protocol only")
	if eval[bool](b, `!document.querySelector("#conn-endpoint").closest("[data-mcp]").hidden`) {
		t.Fatal("the MCP fields show for an HTTP connection")
	}
	choose := func(id, value string) {
		t.Helper()
		eval[bool](b, fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, id, value))
	}
	choose("conn-protocol", "mcp")
	b.waitFor(`!document.querySelector("#conn-endpoint").closest("[data-mcp]").hidden && !document.getElementById("conn-secret").required`, 2*time.Second)

	step(t, "a subject policy without a subject is refused in the page")
	b.fill("Connection id", "docs")
	b.fill("Name", "Docs")
	b.fill("Service", "docs")
	b.fill("Base URL", upstream)
	b.fill("MCP endpoint", "/mcp")
	b.fill("Deny list", "*.delete")
	b.press("button", "Add subject policy")
	b.wantFocus("Add subject policy", "")
	if got := eval[string](b, `document.activeElement.id`); !strings.HasSuffix(got, "-subject") {
		t.Fatalf("after Add subject policy the focus is on #%s, not the new subject", got)
	}
	b.fill("Allow (optional)", "docs.search")
	b.fill("Secret", token)
	b.press("button", "Add connection")
	if msg := b.errorText("Add connection"); !strings.HasPrefix(msg, "Subject policy 1 needs a subject.") {
		t.Fatalf("a subject policy without a subject: %q", msg)
	}

	step(t, "a bad MCP endpoint is refused by the gateway with its code")
	b.fill("Subject (idn-subject)", "ci-bot")
	b.fill("MCP endpoint", "ftp://example.com/mcp")
	b.press("button", "Add connection")
	b.waitFor(`[...document.querySelectorAll("p.err")].some(p => p.textContent.includes("VALIDATION_ERROR"))`, 10*time.Second)
	if msg := b.errorText("Add connection"); !strings.Contains(strings.ToLower(msg), "mcp_endpoint: must use http or https") {
		t.Fatalf("a bad endpoint: %q", msg)
	}
	b.fill("MCP endpoint", "/mcp")
	b.press("button", "Add connection")
	b.waitFor(`document.querySelector("tr[data-connection=docs]")`, 10*time.Second)
	if got := eval[string](b, `document.querySelector("tr[data-connection=docs] td").textContent`); !strings.Contains(got, "MCP") {
		t.Fatalf("the connection's row says %q, not that it is MCP", got)
	}
	if eval[int](b, `document.querySelectorAll("[data-subject]").length`) != 0 || eval[string](b, `document.getElementById("conn-protocol").value`) != "http" {
		t.Fatal("the form kept the added connection's MCP fields")
	}
	conn := rpcResult(t, b, "connections.get", `{"id":"docs"}`)
	if fmt.Sprint(conn["mcp_tool_denylist"]) != "[*.delete]" || fmt.Sprint(conn["mcp_subject_tool_policies"]) != "map[ci-bot:map[allow:[docs.search]]]" ||
		conn["mcp_endpoint"] != "/mcp" || conn["mcp_transport"] != "streamable_http" || conn["protocol"] != "mcp" {
		t.Fatalf("the stored connection: %v", conn)
	}

	step(t, "Test is an MCP handshake")
	b.press("button", "Test Docs")
	b.waitFor(`[...document.querySelectorAll("p.done")].some(p => p.textContent.startsWith("Test passed"))`, 20*time.Second)
	if msg := eval[string](b, `[...document.querySelectorAll("p.done")].find(p => p.textContent.startsWith("Test passed")).textContent`); !regexp.MustCompile(
		`^Test passed: docs-server 2\.4\.0 answered MCP \d{4}-\d\d-\d\d and lists 3 tools, in \d+ ms\.$`).MatchString(msg) {
		t.Fatalf("the test said %q", msg)
	}
	lastTest := func() string {
		return eval[string](b, `document.querySelector('tr[data-connection=docs] [data-label="Last test"]').textContent`)
	}
	if got := lastTest(); !strings.HasPrefix(got, "ok (HTTP 200) ") {
		t.Errorf("after the test the Last test column says %q", got)
	}

	step(t, "Discover lists the tools with their descriptions and hints")
	b.tabTo("Discover Docs")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`!document.getElementById("tools").hidden && document.querySelectorAll("#tools tr[data-tool]").length === 3`, 20*time.Second)
	b.said("Discovered 3 tools; they are listed under Tools of Docs.")
	b.wantFocus("Discover", "Discover Docs")
	rows := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("#tools tr[data-tool]")].map(r => [r.dataset.tool, [...r.cells].map(c => c.textContent).join(" | ")]))`)
	for tool, want := range map[string]string{
		"docs.search":  "Search the docsdocs.search | Finds pages that match a query. | read-only closed world",
		"docs.delete":  "docs.delete | Deletes a page for good. | destructive idempotent",
		"docs.publish": "docs.publish | Publishes a draft on the public site. | not destructive open world",
	} {
		if rows[tool] != want {
			t.Errorf("tool %s shows %q, want %q", tool, rows[tool], want)
		}
	}
	if h := eval[string](b, `document.getElementById("tools-h").textContent`); h != "Tools of Docs" {
		t.Errorf("the tools heading is %q", h)
	}
	choose("conn-protocol", "mcp")
	b.press("button", "Add subject policy")
	b.do(chromedp.KeyEvent("release-bot"))
	b.saveShot("gateway-mcp", false)
	audit("a11y-gateway-mcp")
	choose("conn-protocol", "http")
	eval[bool](b, `(document.querySelectorAll("[data-gw-form=add-connection] [data-subject]").forEach((r) => r.remove()), true)`)

	step(t, "the policy is in force for agents")
	// The serving gateway reads the new connection and its service's
	// claims on its next refresh.
	eventually(t, 20*time.Second, "the agent's tools through the gateway", func() bool {
		return slices.Equal(agentTools(t, gwAddr, agent, ""), []string{"docs.publish", "docs.search"})
	})
	if got := agentTools(t, gwAddr, agent, "ci-bot"); !slices.Equal(got, []string{"docs.search"}) {
		t.Fatalf("ci-bot's tools: %v", got)
	}

	step(t, "edit the endpoint: Test says what failed")
	b.press("button", "Edit Docs")
	b.waitFor(`document.getElementById("edit-connection").open`, 5*time.Second)
	if got := eval[string](b, `[document.getElementById("edit-protocol").value, document.getElementById("edit-endpoint").value,
		document.getElementById("edit-deny").value, document.querySelector("#edit-connection [data-subject] input").value].join(" ")`); got != "mcp /mcp *.delete ci-bot" {
		t.Fatalf("the edit dialog shows %q", got)
	}
	b.saveShot("gateway-mcp-edit", false)
	eval[bool](b, `(document.getElementById("edit-endpoint").value = "/nope", true)`)
	b.press("button", "Save connection")
	b.waitFor(`!document.getElementById("edit-connection").open`, 10*time.Second)
	b.press("button", "Test Docs")
	if msg := b.errorText("Test Docs"); !strings.HasPrefix(msg, "Test failed: initialize: the MCP endpoint answered HTTP 404 Not Found.") {
		t.Fatalf("a test of a wrong endpoint said %q", msg)
	}
	if got := lastTest(); !strings.HasPrefix(got, "failed (HTTP 404) ") {
		t.Errorf("after the failed test the Last test column says %q", got)
	}

	step(t, "edit the policy: remove the subject's, deny one more")
	b.press("button", "Edit Docs")
	b.waitFor(`document.getElementById("edit-connection").open`, 5*time.Second)
	eval[bool](b, `(document.getElementById("edit-endpoint").value = "/mcp", document.getElementById("edit-deny").value = "*.delete\ndocs.publish", true)`)
	b.press("button", "Remove subject policy 1")
	b.press("button", "Save connection")
	b.waitFor(`!document.getElementById("edit-connection").open`, 10*time.Second)
	conn = rpcResult(t, b, "connections.get", `{"id":"docs"}`)
	if fmt.Sprint(conn["mcp_tool_denylist"]) != "[*.delete docs.publish]" || conn["mcp_subject_tool_policies"] != nil || conn["mcp_endpoint"] != "/mcp" {
		t.Fatalf("the edited connection: %v", conn)
	}
	eventually(t, 20*time.Second, "the edited policy in force", func() bool {
		return slices.Equal(agentTools(t, gwAddr, agent, "ci-bot"), []string{"docs.search"}) &&
			slices.Equal(agentTools(t, gwAddr, agent, ""), []string{"docs.search"})
	})
	b.press("button", "Test Docs")
	b.waitFor(`[...document.querySelectorAll("p.done")].some(p => p.textContent.startsWith("Test passed"))`, 20*time.Second)

	step(t, "the secret appears nowhere on the control plane's side")
	for name, got := range map[string][]byte{"relayed RPCs": w.relayed.Bytes(), "control plane's logs": w.logs.Bytes()} {
		if strings.Contains(string(got), token) {
			t.Errorf("the MCP server's token is in the %s", name)
		}
	}
	if b, _ := os.ReadFile(serveLog); strings.Contains(string(b), token) {
		t.Error("the MCP server's token is in the gateway's log")
	}
}

// rpcResult calls a gateway RPC from the page and returns its result.
func rpcResult(t *testing.T, b *browser, method, params string) map[string]any {
	t.Helper()
	gw := eval[string](b, `document.getElementById("gateway-region").dataset.gateway`)
	r := b.apiCall("POST", "/v1/gateways/"+gw+"/rpc", `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`)
	res, ok := r["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: %v", method, r)
	}
	return res
}

// agentTools lists, through the gateway, the tools of the docs connection
// the agent may use as subject ("" for its namespace).
func agentTools(t *testing.T, gwAddr string, agent *identity.Identity, subject string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+gwAddr+"/mcp/docs/tools?refresh=force", nil)
	if err := agent.Sign(req, identity.SignOptions{Subject: subject}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if res.StatusCode != 200 || json.Unmarshal(body, &list) != nil {
		t.Logf("the agent's tool list: %d %s", res.StatusCode, body)
		return nil
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}
