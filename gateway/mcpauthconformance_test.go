package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testnode"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// authScenarios are the conformance runner's client scenarios of MCP
// authorization (its "auth" suite less the extensions: client
// credentials, enterprise-managed authorization).
var authScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/pre-registration",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
	"auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
	"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
}

// authScenariosFailing are the scenarios the gateway fails, and why.
var authScenariosFailing = map[string]string{
	// The scenario's authorization server metadata, found at the MCP
	// server's root, names the issuer <root>/oauth: the go-sdk refuses
	// metadata naming another issuer than the one it was asked for
	// (RFC 8414 §3.3), as it refuses the mix-up such metadata allows.
	"auth/2025-03-26-oauth-metadata-backcompat": "metadata issuer differs from the issuer URL",
}

// conformanceClientEntry names the test the runner starts as its client.
const conformanceClientEntry = "TestConformanceClientEntry"

// The official MCP conformance runner's authorization scenarios with the
// gateway as the MCP client: for each, the runner starts its server and
// authorization server, and this test binary as the client (see
// TestConformanceClientEntry). The outcome of each is logged; each must
// pass but those authScenariosFailing names.
func TestConformanceRunnerAuthScenarios(t *testing.T) {
	t.Parallel()
	command := fmt.Sprintf("%s -test.run=^%s$", os.Args[0], conformanceClientEntry)
	passing := 0
	for _, name := range authScenarios {
		s, out := testnode.ConformanceClient(t, name, command)
		t.Logf("%-45s %+v", name, s)
		why, expected := authScenariosFailing[name]
		switch {
		case s.Passed() && expected:
			t.Errorf("%s passes now: take it off authScenariosFailing (%s)", name, why)
		case !s.Passed() && !expected:
			t.Errorf("%s fails: %s\nrunner:\n%s", name, s.Failure, out)
		}
		if s.Passed() {
			passing++
		}
	}
	t.Logf("conformance client auth scenarios passed: %d of %d", passing, len(authScenarios))
}

// TestConformanceClientEntry is the MCP client the conformance runner
// starts (TestConformanceRunnerAuthScenarios), with its server's URL as
// the last argument: a gateway with that server as an MCP connection in
// oauth2_authorization_code mode connects it as gateway connect does
// (headless: the runner's authorization server answers at once), then an
// approved agent lists the tools and calls test-tool through the
// gateway. A step-up (insufficient_scope) is connected once more, as its
// owner would. Run alone, it skips.
func TestConformanceClientEntry(t *testing.T) {
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	if scenario == "" || flag.NArg() == 0 {
		t.Skip("the MCP conformance runner's client; TestConformanceRunnerAuthScenarios starts it")
	}
	server := flag.Arg(flag.NArg() - 1)
	var scenarioContext struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &scenarioContext); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()

	agent, err := identity.New("conformance-agent")
	if err != nil {
		t.Fatal(err)
	}
	controlPlane := claimcachetest.NewServer()
	defer controlPlane.Close()
	controlPlane.Approve(claimcache.Claim{Namespace: agent.Namespace, Service: "conf", PublicKey: agent.PublicKeyString()})
	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: controlPlane.URL, ServiceAPIKey: controlPlane.APIKey("conf")})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	conn := &credvault.Connection{ID: "conf", Service: "conf", Protocol: credvault.ProtocolMCP, BaseURL: server,
		AuthMode: credvault.AuthOAuth2AuthorizationCode, OAuthClientID: scenarioContext.ClientID}
	var secrets map[string]string
	if scenarioContext.ClientSecret != "" {
		conn.AuthSecretKey, secrets = "client_secret", map[string]string{"client_secret": scenarioContext.ClientSecret}
	}
	if _, err := gw.Vault().Create(ctx, conn, secrets); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	if err := gw.Up(ctx); err != nil {
		t.Fatal(err)
	}

	tokens, err := upstreamauth.New(upstreamauth.Config{Vault: gw.Vault()})
	if err != nil {
		t.Fatal(err)
	}
	connect := func() {
		g, err := gateway.ConnectMCPAccount(ctx, gw.Vault(), tokens, "conf", upstreamauth.MCPConnect{
			RedirectURI: "http://localhost:3000/callback", ClientIDMetadataURL: "https://conformance-test.local/client-metadata.json",
			Authorize: headlessAuthorize})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("connected: %s registration, scopes %v", g.Registration, g.Scopes)
	}
	connect()

	client := mcp.NewClient(&mcp.Implementation{Name: "conformance-agent", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/conf",
		HTTPClient: &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	stepUps := 0
	for _, step := range []func() error{
		func() error { _, err := session.ListTools(ctx, nil); return err },
		func() error {
			_, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test-tool", Arguments: map[string]any{}})
			return err
		},
	} {
		err := step()
		for err != nil && strings.Contains(err.Error(), "not granted (") && stepUps == 0 {
			stepUps++
			connect() // the owner's step-up
			err = step()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// headlessAuthorize is the owner's browser for the runner's
// authorization server, which redirects at once.
func headlessAuthorize(ctx context.Context, authURL string) (url.Values, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Host == "" {
		return nil, errors.New("the authorization server did not redirect")
	}
	return loc.Query(), nil
}
