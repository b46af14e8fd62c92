package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpcBody returns the JSON-RPC message of an endpoint answer: the body of
// an application/json answer, or the last message of an event stream.
func rpcBody(t testing.TB, r response) map[string]any {
	t.Helper()
	raw := r.raw
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		raw = ""
		sc := bufio.NewScanner(strings.NewReader(r.raw))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				raw = v
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("answer %d %q: %v", r.status, r.raw, err)
	}
	return m
}

// A plain tools/call is answered by the endpoint itself as JSON; one that
// asks for progress goes through the SDK's server as an event stream. The
// two answers are the same message.
func TestEndpointDirectAnswersAsTheSDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{Deny: []string{"b.*"}}})
	sid := e.mustConnect(t, alice, nil).ID()
	for i, tt := range []struct{ name, params string }{
		{"result", `{"name":"a.echo","arguments":{"text":"hi","count":2}}`},
		{"tool error", `{"name":"a.fail","arguments":{"text":"x"}}`},
		{"invalid arguments", `{"name":"a.echo","arguments":{"text":5}}`},
		{"denied tool", `{"name":"b.x","arguments":{"text":"x"}}`},
		{"unknown tool", `{"name":"z.nope","arguments":{}}`},
	} {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, tt.params)
		direct := e.raw(t, alice, "POST", "mcp1", sid, call)
		viaSDK := e.raw(t, alice, "POST", "mcp1", sid, strings.Replace(call, `"params":{`, `"params":{"_meta":{"progressToken":"p"},`, 1))
		if ct := direct.header.Get("Content-Type"); direct.status != http.StatusOK || ct != "application/json" {
			t.Errorf("%s: direct answer %d %q", tt.name, direct.status, ct)
		}
		if ct := viaSDK.header.Get("Content-Type"); viaSDK.status != http.StatusOK || ct != "text/event-stream" {
			t.Errorf("%s: SDK answer %d %q", tt.name, viaSDK.status, ct)
		}
		if diff := cmp.Diff(rpcBody(t, viaSDK), rpcBody(t, direct)); diff != "" {
			t.Errorf("%s: direct answer differs from the SDK's (-sdk +direct):\n%s", tt.name, diff)
		}
	}
}

// blockingServer is an upstream whose tool "block" waits until it is
// cancelled, reporting its start on entered and its cancellation on
// cancelled.
func blockingServer(t testing.TB, entered, cancelled chan<- string) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "blocking", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		entered <- "entered"
		<-ctx.Done()
		cancelled <- "cancelled"
		return nil, nil, ctx.Err()
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A call answered directly is withdrawn upstream by the agent's
// notifications/cancelled; its id cannot be reused while it runs.
func TestEndpointDirectCallCancellation(t *testing.T) {
	t.Parallel()
	entered, cancelled := make(chan string, 1), make(chan string, 1)
	e := newEnv(t, mcpproxy.Config{BreakerFailures: 1}, mcpproxy.Connection{BaseURL: blockingServer(t, entered, cancelled)})
	sid := e.mustConnect(t, alice, nil).ID()
	const call = `{"jsonrpc":"2.0","id":"job-1","method":"tools/call","params":{"name":"block","arguments":{}}}`
	answer := make(chan response, 1)
	go func() { answer <- e.raw(t, alice, "POST", "mcp1", sid, call) }()
	<-entered

	if r := e.raw(t, alice, "POST", "mcp1", sid, call); r.status != http.StatusBadRequest || !strings.Contains(r.raw, "already in flight") {
		t.Errorf("the same id while in flight: %d %s", r.status, r.raw)
	}
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"job-1","reason":"user stop"}}`
	if r := e.raw(t, alice, "POST", "mcp1", sid, cancel); r.status != http.StatusAccepted {
		t.Errorf("cancellation: %d %s", r.status, r.raw)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream tool was not cancelled")
	}
	r := <-answer
	if msg := rpcBody(t, r); msg["error"] == nil || msg["id"] != "job-1" {
		t.Errorf("cancelled call answered %v", msg)
	}
	// A withdrawn call says nothing about the upstream: the breaker (of 1)
	// stays closed and the id is free again.
	go func() { answer <- e.raw(t, alice, "POST", "mcp1", sid, call) }()
	select {
	case <-entered:
	case r := <-answer:
		t.Fatalf("second call: %d %s", r.status, r.raw)
	}
	_ = e.raw(t, alice, "POST", "mcp1", sid, cancel)
	<-cancelled
	<-answer
}

// The gateway's upstream calls read both answers a server may give to a
// POST (JSON and an event stream), and answer a ping the server sends
// while a call runs.
func TestUpstreamCallAnswers(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "pinging", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ping.first"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, fmt.Errorf("client did not answer the ping: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "plain"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "plain"}}}, nil, nil
	})
	for _, tt := range []struct {
		name, tool string
		json       bool
	}{
		{"event stream with a ping", "ping.first", false},
		{"JSON answers", "plain", true},
	} {
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: tt.json}))
		t.Cleanup(srv.Close)
		e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})
		res, err := e.mustConnect(t, alice, nil).CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: %+v, %v", tt.name, res, err)
		}
	}
}
