package mcpproxy_test

//lint:file-ignore SA1019 the tests drive sampling, roots and logging, which the SDK deprecates for the newest protocol version only.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// who is the identity a test client presents; the gateway's pipeline would
// have verified it.
type who struct{ namespace, subject, key string }

var (
	alice = who{"alice", "agent", "key-a"}
	bob   = who{"bob", "agent", "key-b"}
)

// identityTransport adds a test identity to every request, as the signing
// transport of a real agent adds its signature.
type identityTransport struct{ who who }

func (t identityTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Namespace", t.who.namespace)
	r.Header.Set("X-Test-Subject", t.who.subject)
	r.Header.Set("X-Test-Key", t.who.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session on the endpoint of connection id as w.
func (e *env) connect(t testing.TB, w who, id string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.srv.URL + "/mcp/" + id,
		HTTPClient: &http.Client{Transport: identityTransport{w}},
		MaxRetries: -1,
	}, session2025)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (e *env) mustConnect(t testing.TB, w who, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := e.connect(t, w, "mcp1", opts)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// raw sends one MCP message to the endpoint of connection id as w, with
// session id sid.
func (e *env) raw(t testing.TB, w who, method, id, sid, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+"/mcp/"+id, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := (&http.Client{Transport: identityTransport{w}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// rpcCode returns the JSON-RPC error in err and the gateway's stable code
// in its data.
func rpcCode(t testing.TB, err error) (*jsonrpc.Error, string) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("error %v is not a JSON-RPC error", err)
	}
	var data struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(je.Data, &data)
	return je, data.Code
}

func names(tools []*mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func TestEndpointToolsFollowThePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{
		Deny:     []string{"b.*"},
		MaxTools: 3,
		Subjects: map[string]mcpproxy.SubjectPolicy{"restricted": {Allow: []string{"a.echo", "c.z"}}},
	}})
	ctx := context.Background()
	tests := []struct {
		subject string
		want    []string
	}{
		// c.z passes the lists but not the cap of 3; b.* is denied.
		{"agent", []string{"a.echo", "a.fail", "a.other"}},
		// A subject allow list cannot bring back what the cap hides.
		{"restricted", []string{"a.echo"}},
	}
	for _, tt := range tests {
		cs := e.mustConnect(t, who{"alice", tt.subject, "key-a"}, nil)
		init := cs.InitializeResult()
		if init.Capabilities.Tools == nil || init.Capabilities.Resources != nil || init.Capabilities.Prompts != nil {
			t.Errorf("capabilities = %+v, want tools only", init.Capabilities)
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(res.Tools); !slices.Equal(got, tt.want) {
			t.Errorf("%s: tools/list = %v, want %v", tt.subject, got, tt.want)
		}
		if rest := toolNames(e.do("GET", "/mcp/mcp1/tools", tt.subject, "")); !slices.Equal(rest, tt.want) {
			t.Errorf("%s: the REST route lists %v, the endpoint %v", tt.subject, rest, tt.want)
		}
		if len(res.Tools) > 0 && !strings.Contains(string(mustJSON(t, res.Tools[0].InputSchema)), `"text"`) {
			t.Errorf("input schema not passed on: %s", mustJSON(t, res.Tools[0].InputSchema))
		}
	}
}

func TestEndpointCallsAreCheckedAsTheCallRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{Deny: []string{"b.*"}}})
	cs := e.mustConnect(t, alice, nil)
	ctx := context.Background()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "hi", "count": 2}})
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "hihi" {
		t.Fatalf("a.echo = %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.fail", Arguments: map[string]any{"text": "x"}})
	if err != nil || !res.IsError {
		t.Fatalf("a tool that fails is a result with isError: %+v, %v", res, err)
	}

	before := e.up.count("tools/call")
	refused := []struct {
		name, tool string
		args       any
		code       string
	}{
		{"denied tool", "b.x", map[string]any{"text": "x"}, "MCP_TOOL_FORBIDDEN"},
		{"undiscovered tool", "z.nope", map[string]any{}, "MCP_TOOL_NOT_FOUND"},
	}
	for _, tt := range refused {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
		je, code := rpcCode(t, err)
		if code != tt.code || je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: error %d %s, want %d %s", tt.name, je.Code, code, jsonrpc.CodeInvalidParams, tt.code)
		}
	}
	// Invalid arguments are a tool error the model can correct, naming the
	// failing path, and never reach the upstream.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": 5}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "/text") {
		t.Fatalf("invalid arguments = %+v, %v", res, err)
	}
	if meta, _ := res.Meta["idn/error"].(map[string]any); meta["code"] != "MCP_TOOL_ARGUMENTS_INVALID" {
		t.Errorf("invalid arguments _meta = %v", res.Meta)
	}
	if n := e.up.count("tools/call"); n != before {
		t.Errorf("refused calls reached the upstream: tools/call %d → %d", before, n)
	}
}

func TestEndpointRateLimitAndBreaker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{RateLimitPerMinute: 1}}, mcpproxy.Connection{})
	cs := e.mustConnect(t, alice, nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "x"}})
	if je, code := rpcCode(t, err); code != "MCP_TOOL_RATE_LIMITED" || !strings.Contains(string(je.Data), "retry_after_seconds") {
		t.Errorf("second call: %v", je)
	}

	e = newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 2, MaxRetries: -1}}, mcpproxy.Connection{})
	cs = e.mustConnect(t, alice, nil)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	e.up.setDown(true)
	for i, want := range []string{"UPSTREAM_ERROR", "UPSTREAM_ERROR", "MCP_CIRCUIT_OPEN"} {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "x"}})
		if je, code := rpcCode(t, err); code != want || je.Code != jsonrpc.CodeInternalError {
			t.Errorf("call %d with the upstream down: %d %s, want %s", i, je.Code, code, want)
		}
	}
	// The agent's own session is unaffected: ping is answered by the gateway.
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// An upstream restarted on the same address that answers the old session
// id with 400 is re-initialized under the agent's session, which never
// notices.
func TestEndpointSurvivesUpstreamRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	e.up.answerLostSessionWith400("Bad Request: No valid session ID provided")
	cs := e.mustConnect(t, alice, nil)
	ctx := context.Background()
	for i := range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "x"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
		e.up.restart()
	}
	// The agent session's own, and its own again after the restart.
	if n := e.up.count("initialize"); n != 2 {
		t.Errorf("upstream initialize = %d, want 2", n)
	}
}

// A session belongs to the caller and the connection it was opened for.
func TestEndpointSessionBelongsToItsCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	e.src.set(&mcpproxy.Connection{ID: "mcp2", BaseURL: e.up.srv.URL})
	cs := e.mustConnect(t, alice, nil)
	sid := cs.ID()
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`

	if r := e.raw(t, alice, "POST", "mcp1", sid, list); r.status != http.StatusOK || !strings.Contains(r.raw, "a.echo") {
		t.Fatalf("owner's own request: %d %s", r.status, r.raw)
	}
	attacks := []struct {
		name, method, conn, sid string
		as                      who
	}{
		{"hijack by another namespace", "POST", "mcp1", sid, who{"mallory", "agent", "key-m"}},
		{"hijack by another key of the same namespace", "POST", "mcp1", sid, who{"alice", "agent", "key-m"}},
		{"hijack by another subject of the same key", "POST", "mcp1", sid, who{"alice", "admin", "key-a"}},
		{"session replayed on another connection", "POST", "mcp2", sid, alice},
		{"event stream of another caller's session", "GET", "mcp1", sid, who{"mallory", "agent", "key-m"}},
		{"delete of another caller's session", "DELETE", "mcp1", sid, who{"mallory", "agent", "key-m"}},
		{"guessed session id", "POST", "mcp1", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", alice},
	}
	for _, tt := range attacks {
		r := e.raw(t, tt.as, tt.method, tt.conn, tt.sid, list)
		if r.status != http.StatusNotFound || r.body["code"] != "MCP_SESSION_NOT_FOUND" {
			t.Errorf("%s: %d %s", tt.name, r.status, r.raw)
		}
	}
	// None of it disturbed the owner's session.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("owner after the attempts: %v", err)
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

func TestEndpointSessionsAreBoundedAndExpire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{MaxSessions: 2}}, mcpproxy.Connection{})
	first := e.mustConnect(t, alice, nil)
	e.mustConnect(t, alice, nil)
	// A caller whose namespace holds none of the full pool is refused.
	r := e.raw(t, bob, "POST", "mcp1", "", initialize)
	if r.status != http.StatusServiceUnavailable || r.body["code"] != "MCP_SESSIONS_EXHAUSTED" || r.header.Get("Retry-After") == "" {
		t.Fatalf("third session: %d %s", r.status, r.raw)
	}
	if err := first.Close(); err != nil { // DELETE ends it
		t.Fatal(err)
	}
	awaitSessions(t, e, 1)
	e.mustConnect(t, bob, nil)

	// Long enough for the handshake under the race detector on a loaded machine.
	e = newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{SessionIdleTimeout: 500 * time.Millisecond}}, mcpproxy.Connection{})
	cs := e.mustConnect(t, alice, nil)
	awaitSessions(t, e, 0)
	if r := e.raw(t, alice, "POST", "mcp1", cs.ID(), `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); r.status != http.StatusNotFound {
		t.Errorf("idle session still answered: %d %s", r.status, r.raw)
	}
}

// awaitSessions waits until the endpoint has n sessions open.
func awaitSessions(t testing.TB, e *env, n float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gaugeValue(t, e, "idn_gateway_mcp_sessions") != n {
		if time.Now().After(deadline) {
			t.Fatalf("sessions = %v, want %v", gaugeValue(t, e, "idn_gateway_mcp_sessions"), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func gaugeValue(t testing.TB, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// slowServer is an upstream whose tool "slow.job" reports progress (when
// asked to), tells entered (when not nil) that it runs, then waits for
// cancellation and reports it on cancelled.
func slowServer(t testing.TB, entered, cancelled chan<- string) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow.job"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Total: 2, Message: "halfway; key sk-upstream-secret"})
		}
		if entered != nil {
			entered <- "entered"
		}
		<-ctx.Done()
		cancelled <- "cancelled"
		return nil, nil, ctx.Err()
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Progress reaches the agent under its own token, scrubbed; the agent's
// cancellation reaches the upstream tool; neither touches the breaker.
func TestEndpointProgressAndCancellation(t *testing.T) {
	t.Parallel()
	cancelled := make(chan string, 1)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 1}}, mcpproxy.Connection{BaseURL: slowServer(t, nil, cancelled), Redact: []string{"sk-upstream-secret"}})
	progress := make(chan *mcp.ProgressNotificationParams, 1)
	cs := e.mustConnect(t, alice, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "slow.job", Arguments: map[string]any{}}
		params.SetProgressToken("agent-token-7")
		_, err := cs.CallTool(ctx, params)
		done <- err
	}()
	select {
	case p := <-progress:
		if p.ProgressToken != "agent-token-7" || p.Progress != 1 || p.Total != 2 || strings.Contains(p.Message, "sk-upstream-secret") {
			t.Errorf("progress = %+v", p)
		}
	case err := <-done:
		t.Fatalf("call ended before any progress: %v", err)
	}
	cancel()
	if got := <-cancelled; got != "cancelled" {
		t.Fatal(got)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call = %v", err)
	}
	// One cancelled call with a breaker of 1: still closed.
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 1 {
		t.Errorf("after the cancellation: %v, %v", res, err)
	}
}

// resourceServer is an upstream with one resource and one prompt.
func resourceServer(t testing.TB) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "docs://readme", Name: "readme"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "token sk-upstream-secret"}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestEndpointResourcesAndPromptsOnlyWhenExposed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := resourceServer(t)
	hidden := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up})
	cs := hidden.mustConnect(t, alice, nil)
	if c := cs.InitializeResult().Capabilities; c.Resources != nil || c.Prompts != nil {
		t.Errorf("capabilities of a connection that exposes nothing: %+v", c)
	}
	for name, call := range map[string]func() error{
		"resources/list": func() error { _, err := cs.ListResources(ctx, nil); return err },
		"resources/read": func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "docs://readme"})
			return err
		},
		"prompts/list": func() error { _, err := cs.ListPrompts(ctx, nil); return err },
		"prompts/get":  func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); return err },
	} {
		var je *jsonrpc.Error
		if err := call(); !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("%s on a connection that does not expose it: %v", name, err)
		}
	}

	shown := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up, ExposeResources: true, ExposePrompts: true, Redact: []string{"sk-upstream-secret"}})
	cs = shown.mustConnect(t, alice, nil)
	if c := cs.InitializeResult().Capabilities; c.Resources == nil || c.Prompts == nil {
		t.Errorf("capabilities of a connection that exposes both: %+v", c)
	}
	list, err := cs.ListResources(ctx, nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "docs://readme" {
		t.Fatalf("resources/list = %+v, %v", list, err)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "docs://readme"})
	if err != nil || read.Contents[0].Text != "token [redacted]" {
		t.Fatalf("resources/read = %+v, %v", read, err)
	}
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || prompt.Messages[0].Content.(*mcp.TextContent).Text != "hello" {
		t.Fatalf("prompts/get = %+v, %v", prompt, err)
	}
}

// EndStreams ends the standalone event streams, so a graceful shutdown
// does not wait for them, and refuses new ones with 405.
func TestEndStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             e.srv.URL + "/mcp/mcp1",
		HTTPClient:           &http.Client{Transport: identityTransport{alice}},
		DisableStandaloneSSE: true, // this test opens the stream itself
	}, session2025)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	req, _ := http.NewRequest("GET", e.srv.URL+"/mcp/mcp1", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := (&http.Client{Transport: identityTransport{alice}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); ended <- err }()
	e.proxy.EndStreams()
	<-ended
	if r := e.raw(t, alice, "GET", "mcp1", cs.ID(), ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET after EndStreams: %d %s", r.status, r.raw)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("POST after EndStreams: %v", err)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A server's sampling request during a call reaches only the agent whose
// call caused it, on that call's stream, and its answer goes back to the
// server; another agent's session on the same connection, and a session
// that did not offer sampling, are never asked. What the server asks is
// scrubbed of the connection's secrets.
func TestServerRequestsReachOnlyTheCallingAgent(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "sampler", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi, my key is sk-upstream-secret"}}}})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL, Redact: []string{"sk-upstream-secret"}})

	sampler := func(name string, asked chan<- string) *mcp.ClientOptions {
		return &mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if text := req.Params.Messages[0].Content.(*mcp.TextContent).Text; strings.Contains(text, "sk-upstream-secret") {
				t.Errorf("the agent was asked %q", text)
			}
			asked <- name
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "answer of " + name}}, nil
		}}
	}
	asked := make(chan string, 10)
	caller := e.mustConnect(t, alice, sampler("alice", asked))
	_ = e.mustConnect(t, bob, sampler("bob", asked))
	_ = e.mustConnect(t, alice, sampler("alice's other session", asked))
	ctx := context.Background()
	res, err := caller.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "answer of alice" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	if got := <-asked; got != "alice" {
		t.Errorf("asked %s", got)
	}

	// An agent that offers no sampling: the server is told so, no one is
	// asked.
	plain := e.mustConnect(t, bob, nil)
	res, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Errorf("call of an agent without sampling = %+v, %v", res, err)
	}
	select {
	case got := <-asked:
		t.Errorf("%s was asked for another agent's call", got)
	default:
	}
}

// The level an agent sets reaches its upstream session, and the server's
// log messages during a call reach the agent, scrubbed of the
// connection's secrets.
func TestLogMessagesAreRelayedScrubbed(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "chatty", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}}})
	mcp.AddTool(s, &mcp.Tool{Name: "log"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "below the level"})
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "up", Data: "key sk-upstream-secret"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL, Redact: []string{"sk-upstream-secret"}})
	logs := make(chan *mcp.LoggingMessageParams, 10)
	cs := e.mustConnect(t, alice, &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logs <- r.Params }})
	if cs.InitializeResult().Capabilities.Logging == nil {
		t.Errorf("capabilities %+v lack the server's logging", cs.InitializeResult().Capabilities)
	}
	ctx := context.Background()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "log", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-logs:
		if l.Level != "warning" || l.Logger != "up" || strings.Contains(fmt.Sprint(l.Data), "sk-upstream-secret") || !strings.Contains(fmt.Sprint(l.Data), "key ") {
			t.Errorf("log message = %+v", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no log message reached the agent")
	}
}

// The endpoint advertises the upstream's instructions and capabilities
// with their flags (resources only where exposed) and lists its tools in
// its order with all their metadata, minus the tools the policy denies.
func TestEndpointRelaysToolMetadataAndCapabilities(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "rich", Version: "1"}, &mcp.ServerOptions{
		Instructions: "use zeta first",
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
	})
	yes, no := true, false
	for _, name := range []string{"zeta", "alpha", "admin.wipe", "mid"} {
		mcp.AddTool(s, &mcp.Tool{
			Name: name, Title: "Title of " + name, Description: "d",
			Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &yes},
			OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}},
			Icons:        []mcp.Icon{{Source: "https://example.com/" + name + ".png"}},
			Meta:         mcp.Meta{"example.com/owner": "team-" + name},
		}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}, Meta: mcp.Meta{"example.com/cost": 3}}, nil, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ctx := context.Background()
	want, err := direct.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}

	for _, exposed := range []bool{false, true} {
		e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL, ExposeResources: exposed, Policy: mcpproxy.Policy{Deny: []string{"admin.*"}}})
		cs := e.mustConnect(t, alice, nil)
		init := cs.InitializeResult()
		if init.Instructions != "use zeta first" {
			t.Errorf("instructions = %q", init.Instructions)
		}
		caps := init.Capabilities
		if caps.Tools == nil || !caps.Tools.ListChanged || caps.Logging == nil {
			t.Errorf("capabilities = %+v", caps)
		}
		if exposed != (caps.Resources != nil) || (exposed && (!caps.Resources.Subscribe || !caps.Resources.ListChanged)) {
			t.Errorf("resources exposed %v: capabilities %+v", exposed, caps.Resources)
		}
		got, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var wantTools []*mcp.Tool
		for _, tool := range want.Tools {
			if tool.Name != "admin.wipe" {
				wantTools = append(wantTools, tool)
			}
		}
		if diff := gocmp.Diff(jsonOf(t, wantTools), jsonOf(t, got.Tools)); diff != "" {
			t.Errorf("tools directly (-) and through the endpoint (+):\n%s", diff)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mid", Arguments: map[string]any{}})
		if err != nil || res.Meta["example.com/cost"] != float64(3) {
			t.Errorf("call result = %+v, %v", res, err)
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
