package upstream_test

//lint:file-ignore SA1019 a server of the stateless revision may still ask for roots, which the SDK deprecates; relaying the question is the point.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// asker answers a server's questions with answer and records them.
type asker struct {
	answer func(wire.Incoming) wire.Response

	mu    sync.Mutex
	asked []string
}

func (a *asker) Enter() (func(), bool)        { return func() {}, true }
func (a *asker) Notify(string, wire.Incoming) {}
func (a *asker) Answer(_ context.Context, msg wire.Incoming) wire.Response {
	a.mu.Lock()
	a.asked = append(a.asked, msg.Method)
	a.mu.Unlock()
	return a.answer(msg)
}

// statelessServer is a go-sdk server of 2026-07-28 alone whose tool
// "two" asks two rounds of questions and returns what it was told, and
// whose tool "routed" takes its argument "region" in a header too.
func statelessServer(t testing.TB) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "newest", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{wire.Revision}})
	mcp.AddTool(s, &mcp.Tool{Name: "two"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		switch req.Params.RequestState {
		case "":
			return &mcp.CallToolResult{RequestState: "one", InputRequests: mcp.InputRequestMap{
				"name": &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "default": "nobody"}}}},
			}}, nil, nil
		case "one":
			name := req.Params.InputResponses["name"].(*mcp.ElicitResult).Content
			raw, _ := json.Marshal(name)
			return &mcp.CallToolResult{RequestState: "two:" + string(raw), InputRequests: mcp.InputRequestMap{
				"roots": &mcp.ListRootsParams{},
			}}, nil, nil
		}
		roots := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Params.RequestState + " " + roots.Roots[0].URI}}}, nil, nil
	})
	schema := json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)
	mcp.AddTool(s, &mcp.Tool{Name: "routed", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest, a struct {
		Region string `json:"region"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Region}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func statelessSession(url string) upstream.Session {
	return upstream.Session{
		Client: http.DefaultClient, Endpoint: func() string { return url }, Protocol: wire.Revision,
		Meta: upstream.StatelessMeta(&mcp.Implementation{Name: "idn-gateway", Version: "1"}, map[string]any{"elicitation": map[string]any{}, "roots": map[string]any{}}),
	}
}

func detachNow(f func()) { f() }

// A call whose server asks in two rounds gets each question answered
// through the handler and the answers carried as written: the server
// reads the agent's fields alone, no schema default filled in.
func TestCallStatelessRunsTheRounds(t *testing.T) {
	t.Parallel()
	url := statelessServer(t)
	h := &asker{answer: func(msg wire.Incoming) wire.Response {
		if msg.Method == "roots/list" {
			return wire.Response{Result: json.RawMessage(`{"roots":[{"uri":"file:///work"}]}`)}
		}
		return wire.Response{Result: json.RawMessage(`{"action":"accept","content":{"extra":"as written"}}`)}
	}}
	res, err := upstream.CallStateless(context.Background(), statelessSession(url), "c1", &mcp.CallToolParams{Name: "two", Arguments: json.RawMessage(`{}`)}, nil, h, nil, detachNow)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decoded(t, res).Content[0].(*mcp.TextContent).Text, `two:{"extra":"as written"} file:///work`; got != want {
		t.Errorf("result %q, want %q", got, want)
	}
	if strings.Join(h.asked, ",") != "elicitation/create,roots/list" {
		t.Errorf("asked %q, want an elicitation then roots", h.asked)
	}
}

// An agent's refusal has no place in a round's answers: the call fails
// with it, and the server is not called again.
func TestCallStatelessFailsWithTheAgentsRefusal(t *testing.T) {
	t.Parallel()
	url := statelessServer(t)
	h := &asker{answer: func(wire.Incoming) wire.Response {
		return wire.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "not offered"}}
	}}
	_, err := upstream.CallStateless(context.Background(), statelessSession(url), "c1", &mcp.CallToolParams{Name: "two", Arguments: json.RawMessage(`{}`)}, nil, h, nil, detachNow)
	if err == nil || !strings.Contains(err.Error(), "not offered") {
		t.Fatalf("err = %v, want the agent's refusal", err)
	}
}

// A tool that takes an argument in a header (x-mcp-header) gets it: the
// server refuses a call whose header is missing.
func TestCallStatelessSendsArgumentHeaders(t *testing.T) {
	t.Parallel()
	url := statelessServer(t)
	schema := json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)
	for _, tt := range []struct {
		name   string
		schema json.RawMessage
		ok     bool
	}{{"with the tool's schema", schema, true}, {"without it", nil, false}} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := upstream.CallStateless(context.Background(), statelessSession(url), "c1", &mcp.CallToolParams{Name: "routed", Arguments: json.RawMessage(`{"region":"eu-west é"}`)}, tt.schema, &asker{}, nil, detachNow)
			if tt.ok && (err != nil || decoded(t, res).Content[0].(*mcp.TextContent).Text != "eu-west é") {
				t.Fatalf("call = %s, %v", res, err)
			}
			if !tt.ok && err == nil {
				t.Fatal("the server took a call without its header")
			}
		})
	}
}

// BenchmarkCallStateless is one tools/call to the go-sdk's stateless
// server through the relay's exchange.
func BenchmarkCallStateless(b *testing.B) {
	url := statelessServer(b)
	s := statelessSession(url)
	schema := json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)
	for b.Loop() {
		if _, err := upstream.CallStateless(context.Background(), s, "c1", &mcp.CallToolParams{Name: "routed", Arguments: json.RawMessage(`{"region":"eu"}`)}, schema, &asker{}, nil, detachNow); err != nil {
			b.Fatal(err)
		}
	}
}

// With Rounds, each round the server asks for goes to the caller, and
// the caller's retry carries the answers and the server's state: the
// same call, held by no one in between.
func TestCallStatelessPassesTheRounds(t *testing.T) {
	t.Parallel()
	url := statelessServer(t)
	h := &asker{}
	call := func(pass *upstream.Rounds) *mcp.CallToolResult {
		t.Helper()
		res, err := upstream.CallStateless(context.Background(), statelessSession(url), "c1", &mcp.CallToolParams{Name: "two", Arguments: json.RawMessage(`{}`)}, nil, h, pass, detachNow)
		if err != nil {
			t.Fatal(err)
		}
		return decoded(t, res)
	}
	first := &upstream.Rounds{}
	call(first)
	if first.Asked == nil || first.Asked.State != "one" || !strings.Contains(string(first.Asked.Questions["name"]), `"elicitation/create"`) {
		t.Fatalf("first round: %+v, want the server's question and state", first.Asked)
	}
	second := &upstream.Rounds{State: first.Asked.State, Answers: map[string]json.RawMessage{"name": json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}}
	call(second)
	if second.Asked == nil || second.Asked.State != `two:{"name":"Ada"}` {
		t.Fatalf("second round: %+v, want the roots question", second.Asked)
	}
	last := &upstream.Rounds{State: second.Asked.State, Answers: map[string]json.RawMessage{"roots": json.RawMessage(`{"roots":[{"uri":"file:///w"}]}`)}}
	res := call(last)
	if last.Asked != nil || res.Content[0].(*mcp.TextContent).Text != `two:{"name":"Ada"} file:///w` {
		t.Fatalf("last round: %+v, %v", last.Asked, res.Content)
	}
	if len(h.asked) != 0 {
		t.Errorf("the handler was asked %q, want nothing", h.asked)
	}
}

// A round is known by its resultType however the server escapes it: a
// result is taken for complete without a second reading only when it
// cannot spell input_required.
func TestRoundWithEscapedResultType(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"c1","result":{"resultType":"input\u005frequired","requestState":"s1","inputRequests":{"q":{"method":"roots/list","params":{}}}}}`))
	}))
	t.Cleanup(srv.Close)
	pass := &upstream.Rounds{}
	if _, err := upstream.CallStateless(context.Background(), statelessSession(srv.URL), "c1", &mcp.CallToolParams{Name: "two", Arguments: json.RawMessage(`{}`)}, nil, &asker{}, pass, detachNow); err != nil {
		t.Fatal(err)
	}
	if pass.Asked == nil || pass.Asked.State != "s1" || len(pass.Asked.Questions) != 1 {
		t.Errorf("the round was not passed on: %+v", pass.Asked)
	}
}

// decoded is a call's result, as written, decoded.
func decoded(t *testing.T, raw json.RawMessage) *mcp.CallToolResult {
	t.Helper()
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return &res
}
