package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type echoArgs struct {
	Text string `json:"text"`
}

// mcpUpstream is a real go-sdk MCP server that insists on the injected
// credential.
func mcpUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	for _, name := range []string{"docs.search", "admin.wipe"} {
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo:" + a.Text}}}, nil, nil
		})
	}
	var calls atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken || r.Header.Get("Idn-Namespace") != "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		calls.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// The MCP routes run through the same signed pipeline as /proxy.
func TestMCPThroughPipeline(t *testing.T) {
	t.Parallel()
	up, calls := mcpUpstream(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})

	a := g.do(g.request(g.agent, "GET", "/mcp/tools/tools", ""))
	if a.status != 200 || !strings.Contains(string(a.body), "docs.search") || strings.Contains(string(a.body), "admin.wipe") {
		t.Fatalf("tools: %d %s", a.status, a.body)
	}
	a = g.do(g.request(g.agent, "POST", "/mcp/tools/tools/docs.search/call", `{"text":"hi"}`))
	if a.status != 200 || !strings.Contains(string(a.body), "echo:hi") || a.env["is_error"] != false {
		t.Fatalf("call: %d %s", a.status, a.body)
	}
	before := calls.Load()
	a = g.do(g.request(g.agent, "POST", "/mcp/tools/tools/admin.wipe/call", `{"text":"x"}`))
	if a.status != 403 || a.env["code"] != "MCP_TOOL_FORBIDDEN" || calls.Load() != before {
		t.Fatalf("denied tool: %d %v, upstream calls %d→%d", a.status, a.env["code"], before, calls.Load())
	}

	// Unsigned, unapproved and wrong-protocol requests never reach the MCP proxy.
	unsigned, _ := http.NewRequest("GET", g.srv.URL+"/mcp/tools/tools", nil)
	if a := g.do(unsigned); a.status != 403 || a.env["code"] != "AUTH_IDENTITY_INVALID" {
		t.Errorf("unsigned: %d %v", a.status, a.env["code"])
	}
	if a := g.do(g.request(g.stranger, "GET", "/mcp/tools/tools", "")); a.status != 403 || a.env["code"] != "AUTH_CLAIM_REQUIRED" {
		t.Errorf("unapproved: %d %v", a.status, a.env["code"])
	}
	if a := g.do(g.request(g.agent, "GET", "/mcp/github/tools", "")); a.status != 400 || a.env["code"] != errcode.ConnectionProtocolMismatch.String() {
		t.Errorf("http connection on /mcp: %d %v", a.status, a.env["code"])
	}
	if a := g.do(g.request(g.agent, "GET", "/proxy/tools/x", "")); a.status != 400 || a.env["code"] != errcode.ConnectionProtocolMismatch.String() {
		t.Errorf("mcp connection on /proxy: %d %v", a.status, a.env["code"])
	}
}

// session2025 has the SDK's client open a 2025-11-25 session, which the
// session tests need: it asks for the stateless revision first otherwise.
var session2025 = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// connectMCP opens an MCP session on the gateway's endpoint for connection
// id, every HTTP request signed by agent.
func (g *gateway) connectMCP(agent *identity.Identity, id string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: g.srv.URL + "/mcp/" + id,
		// A transport of its own: httptest.Server.Close in a parallel test
		// closes the idle connections of http.DefaultTransport, which can
		// break a request just handed one of them.
		HTTPClient: &http.Client{Transport: agent.Transport(http.DefaultTransport.(*http.Transport).Clone(), identity.SignOptions{})},
		MaxRetries: -1,
	}, session2025)
}

// mcpMessage is a signed POST of one MCP message on session sid, and a way
// to send the very same request again.
func (g *gateway) mcpMessage(agent *identity.Identity, sid, body string) (send func() answer) {
	g.t.Helper()
	r := g.request(agent, "POST", "/mcp/tools", body)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		r.Header.Set("Mcp-Session-Id", sid)
	}
	return func() answer {
		again := r.Clone(context.Background())
		again.Body, _ = r.GetBody()
		return g.do(again)
	}
}

// The MCP endpoint answers only signed, approved, fresh requests, serves
// the connection's policy with its credential injected, and keeps each
// session to the caller that opened it.
func TestMCPEndpointThroughPipeline(t *testing.T) {
	t.Parallel()
	up, calls := mcpUpstream(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})
	ctx := context.Background()

	cs, err := g.connectMCP(g.agent, "tools")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "docs.search" {
		t.Fatalf("tools/list = %+v, %v", list, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "echo:hi" {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	before := calls.Load()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin.wipe", Arguments: map[string]any{"text": "x"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), "MCP_TOOL_FORBIDDEN") {
		t.Errorf("denied tool: %v", err)
	} else {
		// The client shows the error, not the HTTP answer's X-Request-Id:
		// the error carries the id the gateway's decision logged.
		var data struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(je.Data, &data)
		if data.RequestID == "" || !strings.Contains(g.logs.String(), `"code":"MCP_TOOL_FORBIDDEN","request_id":"`+data.RequestID+`"`) {
			t.Errorf("denied tool: error data %s names no request id the log carries:\n%s", je.Data, g.logs.String())
		}
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": 5}})
	if err != nil || !res.IsError {
		t.Errorf("invalid arguments: %+v, %v", res, err)
	}
	if calls.Load() != before {
		t.Errorf("refused calls reached the upstream")
	}

	const list1 = `{"jsonrpc":"2.0","id":41,"method":"tools/list"}`
	other, _ := identity.New("other-ns")
	g.approve(other)
	g.refresh()
	attacks := []struct {
		name   string
		send   func() answer
		status int
		code   string
	}{
		{"unsigned request on a live session", func() answer {
			r, _ := http.NewRequest("POST", g.srv.URL+"/mcp/tools", strings.NewReader(list1))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Mcp-Session-Id", cs.ID())
			return g.do(r)
		}, 403, "AUTH_IDENTITY_INVALID"},
		{"approved caller hijacking another caller's session", g.mcpMessage(other, cs.ID(), list1), 404, "MCP_SESSION_NOT_FOUND"},
		{"unapproved caller on a live session", g.mcpMessage(g.stranger, cs.ID(), list1), 403, "AUTH_CLAIM_REQUIRED"},
	}
	for _, tt := range attacks {
		if a := tt.send(); a.status != tt.status || a.env["code"] != tt.code {
			t.Errorf("%s: %d %s", tt.name, a.status, a.body)
		}
	}

	// A signed message replayed verbatim is refused before it reaches the session.
	send := g.mcpMessage(g.agent, cs.ID(), list1)
	if a := send(); a.status != 200 || !strings.Contains(string(a.body), "docs.search") {
		t.Fatalf("signed message: %d %s", a.status, a.body)
	}
	if a := send(); a.status != 403 || a.env["code"] != "AUTH_REPLAY_DETECTED" {
		t.Errorf("replayed message: %d %s", a.status, a.body)
	}
	// The session is still the owner's.
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Errorf("owner after the attempts: %v", err)
	}
}

// An approved agent opening MCP sessions past its key's share, through the
// signed pipeline, ends its own oldest sessions; another approved agent's
// session keeps working and its new sessions still open.
func TestMCPSessionFloodThroughPipeline(t *testing.T) {
	t.Parallel()
	up, _ := mcpUpstream(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})
	other, _ := identity.New("other-ns")
	g.approve(other)
	g.refresh()
	ctx := context.Background()
	victim, err := g.connectMCP(other, "tools")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()

	const share = 32 // mcpproxy's default MaxSessionsPerKey
	var flood []*mcp.ClientSession
	for i := range share + 8 {
		cs, err := g.connectMCP(g.agent, "tools")
		if err != nil {
			t.Fatalf("flood session %d: %v", i, err)
		}
		defer cs.Close()
		flood = append(flood, cs)
	}
	const list = `{"jsonrpc":"2.0","id":41,"method":"tools/list"}`
	if a := g.mcpMessage(g.agent, flood[0].ID(), list)(); a.status != 404 || a.env["code"] != "MCP_SESSION_NOT_FOUND" {
		t.Errorf("the flooder's oldest session: %d %s", a.status, a.body)
	}
	if _, err := flood[len(flood)-1].ListTools(ctx, nil); err != nil {
		t.Errorf("the flooder's newest session: %v", err)
	}
	if _, err := victim.ListTools(ctx, nil); err != nil {
		t.Errorf("the other agent's session during the flood: %v", err)
	}
	again, err := g.connectMCP(other, "tools")
	if err != nil {
		t.Fatalf("the other agent's new session: %v", err)
	}
	_ = again.Close()
}

// MCP traffic is counted and logged as REST traffic is: upstream exchanges
// with protocol="mcp", their failures by class, and one decision record
// per tool listing and tool call, with identities fingerprinted.
func TestMCPTrafficIsObserved(t *testing.T) {
	t.Parallel()
	up, _ := mcpUpstream(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})
	ctx := context.Background()
	cs, err := g.connectMCP(g.agent, "tools")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin.wipe", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a denied tool was called")
	}
	if got := testutil.ToFloat64(g.metrics.upstreamRequests.WithLabelValues("mcp", "tools", "success")); got < 3 {
		t.Errorf(`upstream_requests_total{protocol="mcp",outcome="success"} = %v, want the initialize, list and call at least`, got)
	}
	// The upstream goes away: the next call fails to connect. (Close would
	// wait for the session's event stream.)
	_ = up.Listener.Close()
	up.CloseClientConnections()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "hi"}}); err == nil {
		t.Fatal("a call to a closed upstream succeeded")
	}
	// A refused dial is "connect"; a pooled connection cut under the call
	// is "reset" or "other", whichever the race of the close gives.
	var failed float64
	for _, class := range []string{"connect", "reset", "other"} {
		failed += testutil.ToFloat64(g.metrics.upstreamErrors.WithLabelValues(class))
	}
	if failed < 1 {
		t.Errorf("upstream_error_total counts no failure after an MCP call to a closed upstream")
	}
	if got := testutil.ToFloat64(g.metrics.upstreamRequests.WithLabelValues("mcp", "tools", "error")); got < 1 {
		t.Errorf(`upstream_requests_total{protocol="mcp",outcome="error"} = %v`, got)
	}
	if got := testutil.CollectAndCount(g.metrics.upstreamLatency); got != 2 {
		t.Errorf("upstream_latency_seconds has %d series, want mcp success and error", got)
	}

	logs := g.logs.String()
	for _, want := range []string{
		`"kind":"mcp","outcome":"success","connection_id":"tools","method":"tools/list","protocol":"mcp","namespace":"fp:`,
		`"kind":"mcp","outcome":"success","request_id":"req_`, // a call answered directly has its request's id
		`"connection_id":"tools","method":"tools/call","tool":"docs.search","protocol":"mcp","namespace":"fp:`,
		`"kind":"mcp","outcome":"filtered","code":"MCP_TOOL_FORBIDDEN","request_id":"req_`,
		`"connection_id":"tools","method":"tools/call","tool":"admin.wipe","protocol":"mcp"`,
		`"kind":"mcp","outcome":"error","code":"UPSTREAM_ERROR","request_id":"req_`,
		`"kind":"upstream","outcome":"success","request_id":"req_`,
		`"connection_id":"tools","method":"POST","protocol":"mcp","status":200,"latency_ms":`,
		`"kind":"upstream","outcome":"error","code":"UPSTREAM_ERROR","request_id":"req_`,
		`"connection_id":"tools","method":"POST","protocol":"mcp","latency_ms":`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("decision logs lack %s", want)
		}
	}
	for _, leak := range []string{upstreamToken, g.agent.Namespace, g.agent.PublicKeyString()} {
		if strings.Contains(logs, leak) {
			t.Errorf("decision logs contain %q", leak)
		}
	}
}

// signedSeen records the Signature-Input of each signed request it sends,
// by its Mcp-Method header.
type signedSeen struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen map[string]string
}

func (s *signedSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.seen[r.Header.Get("Mcp-Method")] = r.Header.Get("Signature-Input")
	s.mu.Unlock()
	return s.base.RoundTrip(r)
}

// A client of the stateless revision (2026-07-28) through the signed
// pipeline: its signatures cover Mcp-Method and Mcp-Name, which the
// gateway holds to the body, and the policy applies as in a session.
func TestStatelessMCPThroughPipeline(t *testing.T) {
	t.Parallel()
	up, _ := mcpUpstream(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL})
	ctx := context.Background()
	rec := &signedSeen{base: http.DefaultTransport.(*http.Transport).Clone(), seen: map[string]string{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   g.srv.URL + "/mcp/tools",
		HTTPClient: &http.Client{Transport: g.agent.Transport(rec, identity.SignOptions{})},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "echo:hi" {
		t.Fatalf("tools/call = %+v, %v", res, err)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin.wipe", Arguments: map[string]any{"text": "x"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), "MCP_TOOL_FORBIDDEN") {
		t.Errorf("denied tool: %v", err)
	}
	if in := rec.seen["tools/call"]; !strings.Contains(in, `"idn-agent-cert" "mcp-method" "mcp-name")`) {
		t.Errorf("tools/call signed over %s, want Mcp-Method and Mcp-Name covered", in)
	}

	// An agent that signs headers naming a harmless tool over a body that
	// calls another is refused before anything reads the call.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"admin.wipe","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	r, _ := http.NewRequest("POST", g.srv.URL+"/mcp/tools", strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "docs.search"} {
		r.Header.Set(k, v)
	}
	if err := g.agent.Sign(r, identity.SignOptions{Created: g.clock.now()}); err != nil {
		t.Fatal(err)
	}
	// The revision's own error (HeaderMismatch, -32020), with the code.
	a := g.do(r)
	var rpc struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				Code string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &rpc); err != nil || a.status != 400 || rpc.Error.Code != -32020 || rpc.Error.Data.Code != "MCP_HEADER_MISMATCH" {
		t.Errorf("signed headers naming another tool: %d %s", a.status, a.body)
	}
}
