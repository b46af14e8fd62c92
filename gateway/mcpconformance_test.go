package gateway_test

import (
	"context"
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testnode"
	"github.com/idnhq/idn/mcpproxy"
)

// hostCheckScenario is the conformance scenario of the MCP transport's
// Host/Origin check, which /mcp/{connection_id} does not apply (every
// request is signed; docs/gateway.md says why).
const hostCheckScenario = "dns-rebinding-protection"

// The official MCP conformance runner's server scenarios pass through
// the gateway wherever they pass against the server itself: the go-sdk's
// reference conformance server, directly and as an MCP connection of a
// gateway, reached through a forward proxy that signs each request as an
// approved agent (the runner cannot sign). Only the Host/Origin check may
// differ, as documented.
func TestConformanceRunnerThroughTheGateway(t *testing.T) {
	t.Parallel()
	upstream := startConformanceServer(t)
	endpoint, agent := conformanceGateway(t, upstream)
	direct, out := testnode.ConformanceServer(t, upstream)
	through, outThrough := testnode.ConformanceServer(t, signingProxy(t, endpoint, agent))

	passed := func(results map[string]testnode.Scenario) (n int) {
		for _, s := range results {
			if s.Passed() {
				n++
			}
		}
		return n
	}
	t.Logf("conformance server scenarios passed: %d of %d directly, %d of %d through the gateway",
		passed(direct), len(direct), passed(through), len(through))
	names := make([]string, 0, len(direct))
	for name := range direct {
		names = append(names, name)
	}
	slices.Sort(names)
	failed := false
	for _, name := range names {
		d, g := direct[name], through[name]
		t.Logf("%-32s direct %+v, through the gateway %+v", name, d, g)
		if d.Passed() && !g.Passed() && name != hostCheckScenario {
			t.Errorf("%s passes directly but not through the gateway", name)
			failed = true
		}
	}
	if len(through) != len(direct) {
		t.Errorf("%d scenarios ran directly, %d through the gateway", len(direct), len(through))
		failed = true
	}
	if failed {
		t.Logf("runner, directly:\n%s\nrunner, through the gateway:\n%s", out, outThrough)
	}
}

// startConformanceServer builds and starts the go-sdk's conformance
// server (conformance/everything-server of the go-sdk version in go.mod),
// stateful as the SDK's own conformance script runs it, and returns its
// URL once it accepts connections.
func startConformanceServer(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		const msg = "building the go-sdk's conformance server needs the go command"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	bin := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command(goBin, "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the conformance server: %v\n%s", err, out)
	}
	// The server takes an address, not a listener: a free port is
	// found, freed and handed to it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	server := exec.CommandContext(ctx, bin, "-http="+addr, "-stateless=false")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = server.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conformance server never listened at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// conformanceGateway is a gateway with the MCP connection "docs" to
// upstream (resources and prompts exposed), and an agent the control
// plane approved for it; it returns the gateway's MCP endpoint and the
// agent.
func conformanceGateway(t *testing.T, upstream string) (string, *identity.Identity) {
	t.Helper()
	agent, err := identity.New("conformance-agent")
	if err != nil {
		t.Fatal(err)
	}
	controlPlane := claimcachetest.NewServer()
	t.Cleanup(controlPlane.Close)
	controlPlane.Approve(claimcache.Claim{Namespace: agent.Namespace, Service: "docs", PublicKey: agent.PublicKeyString()})
	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: controlPlane.URL, ServiceAPIKey: controlPlane.APIKey("docs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	ctx := context.Background()
	conn := &credvault.Connection{ID: "docs", Service: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upstream,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", Extensions: mcpproxy.Settings{ExposeResources: true, ExposePrompts: true}.Members()}
	if _, err := gw.Vault().Create(ctx, conn, map[string]string{"token": "conformance-token"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	up, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := gw.Up(up); err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/mcp/docs", agent
}

// signingProxy forwards every request to endpoint signed by agent, as an
// agent's signing transport would send it, and returns its URL.
func signingProxy(t *testing.T, endpoint string, agent *identity.Identity) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.URL.Path, pr.Out.URL.RawPath = target.Scheme, target.Host, target.Path, ""
			// The signature covers the target URI, which the signer reads
			// from RequestURI when set, as a server's request has it.
			pr.Out.Host, pr.Out.RequestURI = target.Host, ""
		},
		Transport:     agent.Transport(nil, identity.SignOptions{}),
		FlushInterval: -1,
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}
