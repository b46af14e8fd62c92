package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPActivityRecords runs a paired gateway in front of the MCP Go
// SDK's server and reads what it reports to its control plane: the tools
// its first listing pinned (events of no agent), the allowed tools/list
// and tools/call with the time they took, and a signed
// request the pipeline admitted but the MCP transport refused (a GET of
// the endpoint without a session, 400) is reported as a refusal.
func TestMCPActivityRecords(t *testing.T) {
	t.Parallel()
	const token = "mcp-token-5e1f0a9b22"
	up := annotatedServer(t, token)
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	claims := claimcachetest.NewServer()
	t.Cleanup(claims.Close)
	claims.Approve(claimcache.Claim{Namespace: "acme", PublicKey: agent.PublicKeyString(), Service: "docs"})
	reported := make(chan pairwire.Activity, 64)
	cp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != pairwire.ActivityPath {
			claims.ServeHTTP(w, r)
			return
		}
		var batch pairwire.ActivityBatch
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, a := range batch.Records {
			reported <- a
		}
		fmt.Fprintf(w, `{"accepted":%d}`, len(batch.Records))
	}))
	t.Cleanup(cp.Close)

	cfg := minimalConfig(t)
	cfg.ControlPlaneURL, cfg.ServiceAPIKey = cp.URL, claims.APIKey("docs")
	cfg.Claims = claimcache.Options{RefreshInterval: 100 * time.Millisecond}
	// The pairing state the reporter reads: paired with cp.
	state := fmt.Sprintf(`{"gateway_id":"gw_test","namespace":"acme","registry_url":%q,"paired_at":"2026-01-01T00:00:00Z"}`, cp.URL)
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "pairing.json"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: up.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": token}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	signed := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
	var cs *mcp.ClientSession
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/docs", HTTPClient: signed}, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect through the gateway: %v", err)
		}
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	res, err := signed.Get(srv.URL + "/mcp/docs") // no session
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET without a session: %d", res.StatusCode)
	}

	want := map[string]bool{"tools/list": false, "tools/call": false, "GET": false, pairwire.EventToolPinned: false}
	for timeout := time.After(15 * time.Second); slices.Contains(slices.Collect(maps.Values(want)), false); {
		select {
		case a := <-reported:
			switch {
			case a.Event != "":
				if a.Event != pairwire.EventToolPinned || a.Tool == "" || a.Decision != pairwire.DecisionAllow || a.AgentKey != "" || a.Connection != "docs" || a.Service != "docs" {
					t.Errorf("a tool pin event reported as %+v", a)
				}
				want[a.Event] = true
			case a.Method == "tools/list" || a.Method == "tools/call":
				if a.Decision != pairwire.DecisionAllow || a.LatencyMS <= 0 {
					t.Errorf("%s reported as %+v, want allowed with its latency", a.Method, a)
				}
				want[a.Method] = true
			case a.Method == "GET":
				if a.Protocol != "mcp" || a.Decision != pairwire.DecisionDeny || a.Status != http.StatusBadRequest ||
					a.Connection != "docs" || a.Service != "docs" || a.AgentKey != agent.PublicKeyString() {
					t.Errorf("the sessionless GET reported as %+v", a)
				}
				want["GET"] = true
			}
		case <-timeout:
			t.Fatalf("reported so far: %v", want)
		}
	}
}
