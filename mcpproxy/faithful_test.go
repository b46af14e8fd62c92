package mcpproxy_test

//lint:file-ignore SA1019 the tests drive sampling and roots, which the SDK deprecates for the newest protocol version only.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// awaitValue returns the next value of ch, failing t after a generous
// bound rather than hanging the suite.
func awaitValue[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
		panic("unreachable")
	}
}

// An agent's notifications/roots/list_changed reaches the server of its
// upstream session, which then asks for the roots again and gets the
// agent's new ones.
func TestRootsListChangedReachesTheServer(t *testing.T) {
	t.Parallel()
	changed := make(chan struct{}, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "rooted", Version: "1"}, &mcp.ServerOptions{
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) { changed <- struct{}{} },
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, " ")}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})

	// Sampling too, so that calls are event streams that can carry the
	// server's roots/list.
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}, Sampling: &mcp.SamplingCapabilities{}},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///old"})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.srv.URL + "/mcp/mcp1", HTTPClient: &http.Client{Transport: identityTransport{alice}}, MaxRetries: -1,
	}, session2025)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	roots := func() string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("roots call = %+v, %v", res, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := roots(); got != "file:///old" {
		t.Fatalf("roots before the change = %q", got)
	}

	client.AddRoots(&mcp.Root{URI: "file:///new"})
	awaitValue(t, changed, "the server told of the agent's roots/list_changed")
	if got := roots(); !strings.Contains(got, "file:///new") {
		t.Errorf("roots after the change = %q", got)
	}
}

// An agent's answer to an elicitation reaches the server as the agent
// wrote it, whichever way the server asked (on a call's stream, or on the
// stream of a request the gateway's own client sent): no default of the
// requested schema filled in, no check the server did not ask for (count
// is past the schema's maximum: this server takes it), its keys in the
// agent's order and its numbers as written.
func TestElicitationAnswersReachTheServerAsWritten(t *testing.T) {
	t.Parallel()
	const answer = `{"action":"accept","content":{"zeta":"first","count":12,"ratio":1.50}}`
	schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","default":"anon"},"count":{"type":"integer","maximum":10},"zeta":{"type":"string"},"ratio":{"type":"number"}}}`)
	elicit := func(ctx context.Context, ss *mcp.ServerSession) {
		// The server's own reading of the answer (its SDK checks it) is
		// not what this test is about: its bytes are, below.
		_, _ = ss.Elicit(ctx, &mcp.ElicitParams{Message: "a few values", RequestedSchema: schema})
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		elicit(ctx, req.Session)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asked"}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "ask"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		elicit(ctx, req.Session)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "asked"}}}}, nil
	})
	answered := make(chan json.RawMessage, 4)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "" && (msg.Result != nil || msg.Error != nil) {
			answered <- append(msg.Result, msg.Error...)
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL, ExposePrompts: true})

	// The agent answers as it likes; its own SDK would check the answer
	// and fill in the defaults too.
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
	})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "elicitation/create" {
				return &mcptasks.Result{Raw: json.RawMessage(answer)}, nil
			}
			return next(ctx, method, req)
		}
	})
	// Outside a call the agent is asked on its session's stream: the
	// prompt waits until the agent has it open.
	streaming := make(chan struct{}, 1)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.srv.URL + "/mcp/mcp1", HTTPClient: &http.Client{Transport: streamOpened{identityTransport{alice}, streaming}}, MaxRetries: -1,
	}, session2025)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if got := awaitValue(t, answered, "the answer during a call"); string(got) != answer {
		t.Errorf("during a call, the server got %s, the agent wrote %s", got, answer)
	}
	awaitValue(t, streaming, "the agent's session stream")
	if _, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "ask"}); err != nil {
		t.Fatal(err)
	}
	if got := awaitValue(t, answered, "the answer outside a call"); string(got) != answer {
		t.Errorf("outside a call, the server got %s, the agent wrote %s", got, answer)
	}
}

// streamOpened signals once the session's event stream (GET) is open.
type streamOpened struct {
	next   http.RoundTripper
	opened chan<- struct{}
}

func (t streamOpened) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		select {
		case t.opened <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// A server that ends a call's event stream before the result, and expects
// the client to resume it (MCP 2025-11-25: event ids, a retry time, then
// GET with Last-Event-ID), has the call resumed rather than failed: the
// agent gets the progress sent before and after the break, and the result.
func TestCallStreamEndedEarlyIsResumed(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "poller", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "poll"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Message: "before the break"})
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: time.Millisecond})
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 2, Message: "after the break"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "polled"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})

	progress := make(chan string, 4)
	cs := e.mustConnect(t, alice, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params.Message
	}})
	params := &mcp.CallToolParams{Name: "poll", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "polled" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	for _, want := range []string{"before the break", "after the break"} {
		if got := awaitValue(t, progress, want); got != want {
			t.Errorf("progress %q, want %q", got, want)
		}
	}
	// A REST call takes the same path.
	r := e.call("agent", "poll", `{}`)
	wantStatus(t, r, http.StatusOK, "")
}

// A server of the newest protocol alone asks for input within its
// results (multi-round-trip), which the SDK's client fulfils with its
// handlers, not its middleware: the agent is still asked, and its answer
// reaches the server.
func TestElicitationOfAServerOfTheNewestProtocol(t *testing.T) {
	t.Parallel()
	newest := mcp.NewServer(&mcp.Implementation{Name: "newest", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	mcp.AddTool(newest, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": &mcp.ElicitParams{
				Message: "name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
			}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + fmt.Sprint(res.Content["name"])}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newest }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})
	cs := e.mustConnect(t, alice, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "accept Ada" {
		t.Fatalf("call = %s, %v", jsonOf(t, res), err)
	}
}
