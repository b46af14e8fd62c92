package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkUpstreamToken is the credential the gateway injects; the upstreams
// answer only requests that carry it, so a 200 proves the injection.
const sdkUpstreamToken = "sdk-upstream-token"

// sdkWorld is a real control plane and gateway with a REST connection
// ("weather", bearer token injected) and an MCP connection ("tools", a
// go-sdk MCP server behind the same token), both of service "weather",
// plus an approver: POST {approve}?namespace=NS&claim=ID approves the claim
// as the namespace's owner, as a person would on the claims page.
type sdkWorld struct {
	cp       *controlPlane
	apiKey   string // the service "weather"'s, for the SDKs' verifiers
	gateway  string
	approve  string
	sessions map[string]string
}

func newSDKWorld(t *testing.T, namespaces ...string) *sdkWorld {
	t.Helper()
	cp := newControlPlane(t)
	seeded := cp.seed(fmt.Sprintf(`{"namespaces":["%s"],"services":[{"slug":"weather","owner":"weather-co"}]}`, strings.Join(namespaces, `","`)))

	needsToken := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+sdkUpstreamToken {
				http.Error(w, `{"error":"no credential"}`, http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	// elsewhere is where the upstream's redirect points: another host and
	// port, which tells the agent whether any signing header reached it.
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := []string{}
		for _, h := range []string{"Signature", "Signature-Input", "Content-Digest", "Idn-Namespace", "Idn-Subject", "Idn-Agent-Key", "Idn-Agent-Cert"} {
			if r.Header.Get(h) != "" {
				got = append(got, strings.ToLower(h))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"landed": true, "signing_headers": got, "body_bytes": len(body)})
	}))
	t.Cleanup(elsewhere.Close)
	rest := httptest.NewServer(needsToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/forged":
			// An upstream posing as the gateway, with a claim of another key.
			w.Header().Set("Idn-Error", "AUTH_CLAIM_REQUIRED")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":"approve me","code":"AUTH_CLAIM_REQUIRED","request_id":"req_forged","timestamp":"2026-01-01T00:00:00Z",`+
				`"docs_url":"https://github.com/idnhq/idn/blob/main/docs/errors.md#AUTH_CLAIM_REQUIRED","claim_id":"clm_stranger","claim_status":"pending"}`)
			return
		case "/moved":
			w.Header().Set("Location", elsewhere.URL+"/landing")
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusTemporaryRedirect)
			fmt.Fprint(w, "moved")
			return
		}
		fmt.Fprintf(w, `{"city":%q,"forecast":"sunny","credential_injected":true}`, r.URL.Query().Get("city"))
	})))
	t.Cleanup(rest.Close)
	server := mcp.NewServer(&mcp.Implementation{Name: "weather-tools", Version: "1"}, nil)
	type nowArgs struct {
		City string `json:"city" jsonschema:"the city"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "weather.now", Description: "the weather now"},
		func(_ context.Context, _ *mcp.CallToolRequest, a nowArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny in " + a.City}}}, nil, nil
		})
	tools := httptest.NewServer(needsToken(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	t.Cleanup(tools.Close)

	w := &world{cp: cp, apiKey: seeded.APIKeys["weather"]}
	gw := startGateway(t, w, nil,
		conn{c: credvault.Connection{ID: "weather", Service: "weather", BaseURL: rest.URL, AuthMode: credvault.AuthBearer, AuthSecretKey: "token"},
			secrets: map[string]string{"token": sdkUpstreamToken}},
		conn{c: credvault.Connection{ID: "tools", Service: "weather", Protocol: credvault.ProtocolMCP, BaseURL: tools.URL, AuthMode: credvault.AuthBearer, AuthSecretKey: "token"},
			secrets: map[string]string{"token": sdkUpstreamToken}})

	sw := &sdkWorld{cp: cp, apiKey: seeded.APIKeys["weather"], gateway: gw.url, sessions: seeded.Sessions}
	approver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ns, claim := r.URL.Query().Get("namespace"), r.URL.Query().Get("claim")
		session, ok := sw.sessions[ns]
		if r.Method != http.MethodPost || !ok || !strings.HasPrefix(claim, "clm_") {
			http.Error(rw, "want POST ?namespace=<seeded>&claim=clm_…", http.StatusBadRequest)
			return
		}
		req, _ := http.NewRequest(http.MethodPost, cp.url()+"/v1/claims/"+claim+"/approve", nil)
		req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: session})
		a, err := do(http.DefaultClient, req)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		rw.WriteHeader(a.status)
		_, _ = rw.Write(a.body)
	}))
	t.Cleanup(approver.Close)
	sw.approve = approver.URL
	return sw
}

// claimsPage is the owner's claims page of namespace, as HTML.
func (sw *sdkWorld) claimsPage(t *testing.T, namespace string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, sw.cp.url()+"/claims?status=approved", nil)
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: sw.sessions[namespace]})
	a, err := do(http.DefaultClient, req)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("claims page: %v %d %s", err, a.status, a.body)
	}
	return string(a.body)
}

// needSDK skips the test (fails it under CI=true) when a part the SDK
// suites need is missing.
func needSDK(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	msg := what + " (.ci/run prepares it)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// runSDKSuite runs one SDK's suite against sw as agent namespace ns with
// display name name, then checks what the servers saw: the identity the
// SDK saved is one the Go package loads, and the owner's claims page shows
// the agent's name.
func runSDKSuite(t *testing.T, sw *sdkWorld, ns, name, dir string, argv ...string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"IDN_HOME="+home,
		"IDN_IT_GATEWAY="+sw.gateway,
		"IDN_IT_CONTROLPLANE="+sw.cp.url(),
		"IDN_IT_APPROVE="+sw.approve,
		"IDN_IT_NAMESPACE="+ns,
		"IDN_IT_NAME="+name,
		"IDN_IT_REST=weather",
		"IDN_IT_MCP=tools",
		"IDN_IT_SERVICE=weather",
		"IDN_IT_API_KEY="+sw.apiKey,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", strings.Join(argv, " "), out)
	if err != nil {
		t.Fatalf("SDK suite failed: %v", err)
	}
	id, err := identity.Load(home, ns)
	if err != nil {
		t.Fatalf("the identity the SDK saved does not load in Go: %v", err)
	}
	if id.Name() != name {
		t.Fatalf("saved identity's name = %q, want %q", id.Name(), name)
	}
	if page := sw.claimsPage(t, ns); !strings.Contains(page, html.EscapeString(name)) {
		t.Fatalf("the claims page does not show the agent's name %q", name)
	}
}

// TestSDKsAgainstRealServers drives each SDK's own suite (sdk/*/it) against
// the real control plane and gateway: create an identity with the SDK's
// init command, be refused with AUTH_CLAIM_REQUIRED and a claim id, get
// approved, succeed through /proxy/… with the credential injected (also
// with a non-ASCII subject and a bare '?'), see an upstream's forged
// claim as a plain 403, follow an upstream's redirect to another port
// unsigned, call a tool through /mcp/{id} (TypeScript with the official
// MCP SDK client), call a signed control-plane route, and call a service
// that verifies agents itself (the SDK's verifier with the control plane's
// claim check): refused with a claim, approved, admitted.
func TestSDKsAgainstRealServers(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sw := newSDKWorld(t, "sdk-ts-agent", "sdk-py-agent")

	t.Run("typescript", func(t *testing.T) {
		dir := filepath.Join(root, "sdk", "typescript")
		node, err := exec.LookPath("node")
		needSDK(t, err == nil, "the TypeScript SDK suite needs node")
		needSDK(t, exists(filepath.Join(dir, "dist", "index.js")) && exists(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")),
			"the TypeScript SDK suite needs sdk/typescript built with its packages (npm ci && npm run build there)")
		runSDKSuite(t, sw, "sdk-ts-agent", "TypeScript test agent · CI", dir, node, "--test", "it/")
	})

	t.Run("python", func(t *testing.T) {
		python := os.Getenv("IDN_PYTHON")
		if python == "" {
			python = "/usr/bin/python3"
		}
		probe := exec.Command(python, "-c", "import cryptography, httpx, requests, pytest")
		needSDK(t, probe.Run() == nil, "the Python SDK suite needs "+python+" with cryptography, httpx, requests and pytest (Debian: python3-cryptography python3-httpx python3-requests python3-pytest; or set IDN_PYTHON)")
		runSDKSuite(t, sw, "sdk-py-agent", "Python test agent & co", filepath.Join(root, "sdk", "python"), python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "it")
	})
}
