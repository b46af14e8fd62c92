package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// actionDesk is a control plane's action routes over claimcachetest's
// claims: it records what the gateway files and answers the decision a
// test sets.
type actionDesk struct {
	mu        sync.Mutex
	filed     []approval.Request
	decisions map[string]map[string]any
	filedCh   chan approval.Request
}

func (d *actionDesk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Method == http.MethodPost {
		var f struct {
			ID        string    `json:"id"`
			Gateway   string    `json:"gateway"`
			Digest    string    `json:"digest"`
			Target    string    `json:"target"`
			ExpiresAt time.Time `json:"expires_at"`
		}
		_ = json.NewDecoder(r.Body).Decode(&f)
		req := approval.Request{ID: f.ID, Gateway: f.Gateway, Digest: f.Digest, Target: f.Target, ExpiresAt: f.ExpiresAt}
		d.filed = append(d.filed, req)
		d.filedCh <- req
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q,"status":"pending"}`, f.ID)
		return
	}
	id := r.PathValue("id")
	dec, ok := d.decisions[id]
	if !ok {
		dec = map[string]any{"id": id, "status": "pending"}
	}
	_ = json.NewEncoder(w).Encode(dec)
}

func (d *actionDesk) decide(id string, dec map[string]any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.decisions[id] = dec
}

// TestMCPBridgeWaitsForAnAction: a tools/call the gateway holds for the
// owner's passkey keeps waiting in idn mcp, which tells the client why
// once, and returns the tool's result once the owner approved; a denial
// ends the wait with the gateway's answer.
func TestMCPBridgeWaitsForAnAction(t *testing.T) { testMCPBridgeWaitsForAnAction(t, maxRelayedVersion) }

// TestMCPBridgeWaitsForAnAction with a stdio client of the stateless
// revision.
func TestMCPBridgeWaitsForAnActionStateless(t *testing.T) {
	testMCPBridgeWaitsForAnAction(t, statelessRevision)
}

func testMCPBridgeWaitsForAnAction(t *testing.T, version string) {
	upURL, _, _ := mcpUpstream(t)
	st := &mcpStack{home: t.TempDir(), version: version}
	var err error
	if st.agent, err = identity.New("desk-agent"); err != nil {
		t.Fatal(err)
	}
	if err := st.agent.Save(st.home); err != nil {
		t.Fatal(err)
	}
	claims := claimcachetest.NewServer()
	t.Cleanup(claims.Close)
	claims.Approve(claimcache.Claim{Namespace: st.agent.Namespace, Service: "docs", PublicKey: st.agent.PublicKeyString()})
	desk := &actionDesk{decisions: map[string]map[string]any{}, filedCh: make(chan approval.Request, 8)}
	claimsURL, _ := url.Parse(claims.URL)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/gateways/actions", desk)
	mux.Handle("GET /v1/gateways/actions/{id}", desk)
	mux.Handle("/", httputil.NewSingleHostReverseProxy(claimsURL))
	controlPlane := httptest.NewServer(mux)
	t.Cleanup(controlPlane.Close)

	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	dataDir := t.TempDir()
	pinned, _ := json.Marshal(approvaltest.Keys("owner", owner))
	if err := os.WriteFile(filepath.Join(dataDir, pairing.OwnerKeysFile), pinned, 0o600); err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{DataDir: dataDir, MasterKey: key, ControlPlaneURL: controlPlane.URL, ServiceAPIKey: claims.APIKey("docs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	ctx := context.Background()
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "docs", Service: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upURL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", ApprovalTools: []string{"docs.search"}}, map[string]string{"token": upstreamToken}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	st.url = srv.URL
	up, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := gw.Up(up); err != nil {
		t.Fatal(err)
	}

	logged := make(chan string, 8)
	cs := st.bridge(t, &mcp.ClientOptions{
		//lint:ignore SA1019 desktop clients of the protocol versions idn mcp relays show log messages
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logged <- fmt.Sprint(r.Params.Data) },
	}, "--retry", "20ms")

	type result struct {
		res *mcp.CallToolResult
		err error
	}
	call := func() chan result {
		out := make(chan result, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "payroll"}})
			out <- result{res, err}
		}()
		return out
	}

	approved := call()
	req := <-desk.filedCh
	if req.Target != "tool docs.search" {
		t.Fatalf("filed %+v", req)
	}
	if msg := <-logged; !strings.Contains(msg, req.ID) || !strings.Contains(msg, "passkey") {
		t.Fatalf("the client was told %q", msg)
	}
	g := approval.Grant{ActionID: req.ID, Gateway: req.Gateway, Digest: req.Digest, ExpiresAt: req.ExpiresAt, Uses: 1}
	assertion, _ := json.Marshal(owner.Assert(approval.Challenge(g), approvaltest.Flags))
	desk.decide(req.ID, map[string]any{"id": req.ID, "status": "approved", "uses": 1, "assertion": json.RawMessage(assertion)})
	if r := <-approved; r.err != nil || r.res.IsError || r.res.Content[0].(*mcp.TextContent).Text != "found:payroll" {
		t.Fatalf("the approved call: %+v, %v", r.res, r.err)
	}

	denied := call()
	req = <-desk.filedCh
	desk.decide(req.ID, map[string]any{"id": req.ID, "status": "denied"})
	r := <-denied
	var je *jsonrpc.Error
	if !errors.As(r.err, &je) || !strings.Contains(string(je.Data), "AUTH_ACTION_DENIED") {
		t.Fatalf("the denied call: %+v, %v", r.res, r.err)
	}
}
