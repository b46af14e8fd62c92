package mcpproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/internal/mcpconversation"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectStateless opens the go-sdk client's 2026-07-28 conversation with
// endpoint (server/discover, then stateless requests) as w.
func connectStateless(t testing.TB, endpoint string, w who, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: identityTransport{w}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want the stateless revision 2026-07-28", v)
	}
	return cs
}

// askingServer is a go-sdk server whose tool "confirm" asks its client to
// confirm (elicitation) before it answers, written as the stateless
// revision wants: it returns the question, and the SDK puts it to a
// client of an older revision itself. Its tool "echo" echoes, "count"
// reports two steps of progress, and "routed" takes its argument region
// in a header too (x-mcp-header), which the stateless revision checks.
func askingServer() *mcp.Server { return askingServerOf(nil) }

// askingServerOf is askingServer offering versions alone (nil: every
// version the SDK knows).
func askingServerOf(versions []string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking-upstream", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	mcp.AddTool(s, &mcp.Tool{Name: "confirm", Description: "asks before it answers"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		if answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
			raw, _ := json.Marshal(answer.Content)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer.Action + " " + string(raw)}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Message:         "really send " + a.Text + "?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
		}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "routed", Description: "takes its region in a header too", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)}, func(_ context.Context, _ *mcp.CallToolRequest, a struct {
		Region string `json:"region"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Region}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "reports its progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			for i := 1; i <= 2; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 2, Message: "step"})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + r.Params.Arguments["who"]}}}}, nil
	})
	s.AddResource(&mcp.Resource{Name: "readme", URI: "file:///readme", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "read me"}}}, nil
	})
	return s
}

// The same 2026-07-28 conversation of the go-sdk client, held with the
// server directly (its stateless handler) and through the gateway (whose
// upstream session is 2025-11-25), gets the same answers: the listing,
// a call, and a call whose server asks the agent, answered in rounds.
func TestStatelessRevisionMatchesTheServer(t *testing.T) {
	t.Parallel()
	direct := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return askingServer() }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(direct.Close)
	session := askingServer()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return session }, nil))
	t.Cleanup(up.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.URL, ExposeResources: true, ExposePrompts: true})

	var asked []string
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, r.Params.Message)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
	}}
	conversation := func(endpoint string) []any {
		cs := connectStateless(t, endpoint, alice, opts)
		var got []any
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, list.Tools)
		for _, c := range []struct{ tool, text string }{{"echo", "hi"}, {"confirm", "the report"}} {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": c.text}})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, res.Content, res.IsError)
		}
		prompts, err := cs.ListPrompts(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		prompt, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "alice"}})
		if err != nil {
			t.Fatal(err)
		}
		resources, err := cs.ListResources(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		read, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "file:///readme"})
		if err != nil {
			t.Fatal(err)
		}
		return append(got, prompts.Prompts, prompt.Messages, resources.Resources, read.Contents, cs.InitializeResult().Capabilities)
	}
	want := conversation(direct.URL)
	got := conversation(e.srv.URL + "/mcp/mcp1")
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("through the gateway (-direct +gateway):\n%s", diff)
	}
	// The calls above took the fast path; the SDK's server gives the same.
	viaSDK := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.URL, ExposeResources: true, ExposePrompts: true})
	mcpproxy.UseSDKPaths(viaSDK.proxy, true, false)
	if diff := gocmp.Diff(want, conversation(viaSDK.srv.URL+"/mcp/mcp1")); diff != "" {
		t.Errorf("through the gateway's SDK path (-direct +gateway):\n%s", diff)
	}
	if len(asked) != 3 || asked[0] != asked[1] || asked[1] != asked[2] {
		t.Errorf("the agent was asked %q, want the same question once each way", asked)
	}
}

// A stateless tools/call takes the same policy as a session's: a tool the
// subject may not use is refused with the REST code in the error's data.
func TestStatelessRevisionTakesThePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{Deny: []string{"b.*"}}})
	cs := connectStateless(t, e.srv.URL+"/mcp/mcp1", alice, nil)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if strings.HasPrefix(tool.Name, "b.") {
			t.Errorf("tools/list lists %s, which the policy denies", tool.Name)
		}
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "b.x", Arguments: map[string]any{"text": "x"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), "MCP_TOOL_FORBIDDEN") {
		t.Fatalf("calling a denied tool: %v, want a JSON-RPC error with MCP_TOOL_FORBIDDEN", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "ok"}})
	if err != nil || res.IsError {
		t.Fatalf("calling an allowed tool: %v %+v", err, res)
	}
	// Every stateless request of the caller rides one upstream session.
	if n := e.up.count("initialize"); n != 1 {
		t.Errorf("the upstream saw %d initialize requests, want 1 (one lane)", n)
	}
}

// A retry naming another caller's requestState is refused as an unknown
// one: rounds are bound to the caller that started them.
func TestStatelessRoundsBelongToTheirCaller(t *testing.T) {
	t.Parallel()
	session := askingServer()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return session }, nil))
	t.Cleanup(up.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.URL})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	first := e.rawStateless(t, alice, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{"text":"x"},`+meta+`}}`)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round: %v, want input_required with a requestState", first)
	}
	retry := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"confirm","arguments":{"text":"x"},"requestState":"` + state + `","inputResponses":{"1":{"action":"accept","content":{"ok":true}}},` + meta + `}}`
	if stolen := e.rawStateless(t, bob, retry); stolen["error"] == nil {
		t.Fatalf("another caller's retry: %v, want an error", stolen)
	}
	done := e.rawStateless(t, alice, retry)
	if done["resultType"] != "complete" {
		t.Fatalf("the caller's own retry: %v, want the complete result", done)
	}
}

// rawStateless posts one stateless request as w and returns its result,
// or the whole answer when it is an error.
func (e *env) rawStateless(t testing.TB, w who, body string) map[string]any {
	t.Helper()
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal([]byte(body), &msg)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/mcp/mcp1", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", msg.Method)
	if msg.Params.Name != "" {
		req.Header.Set("Mcp-Name", msg.Params.Name)
	}
	resp, err := (&http.Client{Transport: identityTransport{w}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := rpcBody(t, response{status: resp.StatusCode, header: resp.Header, raw: string(raw)})
	if res, ok := out["result"].(map[string]any); ok {
		return res
	}
	return out
}

// The TypeScript SDK v2 client's 2026-07-28 conversation, held with the
// server directly and through the gateway, gets the same answers message
// by message: the era, the listing, a call, a call whose server asks
// (answered in rounds by the SDK), an unknown tool's error code, and
// prompts and resources.
func TestStatelessRevisionTypeScriptClient(t *testing.T) {
	t.Parallel()
	direct := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return askingServer() }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(direct.Close)
	session := askingServer()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return session }, nil))
	t.Cleanup(up.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.URL, ExposeResources: true, ExposePrompts: true})

	want := mcpconversation.Stateless(t, direct.URL)
	got := mcpconversation.Stateless(t, e.srv.URL+"/mcp/mcp1", "X-Test-Namespace=alice", "X-Test-Subject=agent", "X-Test-Key=key-a")
	if len(want) != 10 || want[3]["asked"] != "elicitation/create" {
		t.Fatalf("the direct conversation did not run its rounds: %v", want)
	}
	if diff := gocmp.Diff(documented(want), documented(got)); diff != "" {
		t.Errorf("through the gateway (-direct +gateway):\n%s", diff)
	}
}

// documented removes the differences docs/gateway.md lists from a
// transcript: the server's name in results, and the message of an error
// (the gateway words its own refusals; the code is the same).
func documented(steps []map[string]any) []map[string]any {
	for _, st := range steps {
		if res, ok := st["result"].(map[string]any); ok {
			if meta, ok := res["_meta"].(map[string]any); ok {
				if info, ok := meta["io.modelcontextprotocol/serverInfo"].(map[string]any); ok {
					info["name"] = "(the server)"
				}
			}
		}
		if e, ok := st["error"].(map[string]any); ok {
			delete(e, "message")
		}
	}
	return steps
}

// Lanes take places in the sessions' pool: a caller past its key's share
// evicts its own least recently used session or lane, whichever it is,
// and a lane evicted is opened again by the caller's next request.
func TestStatelessLanesShareThePool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{MaxSessionsPerKey: 1}}, mcpproxy.Connection{})
	session := e.mustConnect(t, alice, &mcp.ClientOptions{})
	list := func(caps string) map[string]any {
		return e.rawStateless(t, alice, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":`+caps+`}}}`)
	}
	if res := list(`{}`); res["tools"] == nil {
		t.Fatalf("stateless tools/list: %v", res)
	}
	if _, err := session.ListTools(context.Background(), nil); err == nil {
		t.Error("the caller's session outlived the lane that took its place")
	}
	// Another declaration is another lane: it evicts the first, and the
	// first is opened again when asked for.
	for _, caps := range []string{`{"elicitation":{}}`, `{}`} {
		if res := list(caps); res["tools"] == nil {
			t.Fatalf("stateless tools/list declaring %s: %v", caps, res)
		}
	}
	if n := e.up.count("initialize"); n != 4 {
		t.Errorf("the upstream saw %d initialize requests, want 4 (a session and three lanes)", n)
	}
}
