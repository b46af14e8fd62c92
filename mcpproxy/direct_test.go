package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
		{"a client's own _meta", `{"name":"a.echo","arguments":{"text":"hi"},"_meta":{"example.com/trace":"t1"}}`},
	} {
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, tt.params)
		direct := e.raw(t, alice, "POST", "mcp1", sid, call)
		withProgress := strings.Replace(call, `"params":{`, `"params":{"_meta":{"progressToken":"p"},`, 1)
		if strings.Contains(call, `"_meta":{`) {
			withProgress = strings.Replace(call, `"_meta":{`, `"_meta":{"progressToken":"p",`, 1)
		}
		viaSDK := e.raw(t, alice, "POST", "mcp1", sid, withProgress)
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

// A call answered directly is withdrawn upstream by the agent's
// notifications/cancelled; its id cannot be reused while it runs.
func TestEndpointDirectCallCancellation(t *testing.T) {
	t.Parallel()
	entered, cancelled := make(chan string, 1), make(chan string, 1)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 1}}, mcpproxy.Connection{BaseURL: slowServer(t, entered, cancelled)})
	sid := e.mustConnect(t, alice, nil).ID()
	const call = `{"jsonrpc":"2.0","id":"job-1","method":"tools/call","params":{"name":"slow.job","arguments":{}}}`
	answer := make(chan response, 1)
	go func() { answer <- e.raw(t, alice, "POST", "mcp1", sid, call) }()
	within(t, entered, "the upstream tool to start")

	if r := e.raw(t, alice, "POST", "mcp1", sid, call); r.status != http.StatusBadRequest || !strings.Contains(r.raw, "already in flight") {
		t.Errorf("the same id while in flight: %d %s", r.status, r.raw)
	}
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"job-1","reason":"user stop"}}`
	if r := e.raw(t, alice, "POST", "mcp1", sid, cancel); r.status != http.StatusAccepted {
		t.Errorf("cancellation: %d %s", r.status, r.raw)
	}
	within(t, cancelled, "the upstream tool's cancellation")
	r := within(t, answer, "the cancelled call's answer")
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
	within(t, cancelled, "the second cancellation")
	within(t, answer, "the second call's answer")
}

// within returns the next value from ch, failing the test after 10 s.
func within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
	}
	panic("unreachable")
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

// interceptedServer serves upstream's tools with a go-sdk server, except
// that answer, when it returns true, answers a tools/call POST itself.
func interceptedServer(t testing.TB, answer func(w http.ResponseWriter, id json.RawMessage) bool) string {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && answer(w, msg.ID) {
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Whatever an upstream answers a call with, the gateway answers an error
// and keeps running; a JSON-RPC error in a 4xx answer is the server's
// verdict and leaves the session and the breaker alone.
func TestUpstreamCallOddAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, contentType, body string
		status                  int
		serverAnswered          bool
	}{
		{"JSON for another id", "application/json", `{"jsonrpc":"2.0","id":"other","result":{"content":[]}}`, 200, false},
		{"JSON notification", "application/json", `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`, 200, false},
		{"JSON empty object", "application/json", `{}`, 200, false},
		{"JSON error with a null id", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, 200, true},
		{"stream without the result", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":\"other\",\"result\":{}}\n\n", 200, false},
		{"stream with a null-id error", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse error\"}}\n\n", 200, true},
		{"400 with a JSON-RPC error", "application/json", `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32602,"message":"bad arguments here"}}`, 400, true},
		{"404 with an id-less JSON-RPC error (a lost session)", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`, 404, false},
		{"503 with a JSON-RPC error", "application/json", `{"jsonrpc":"2.0","id":$ID,"error":{"code":-32603,"message":"busy"}}`, 503, false},
		{"500 without one", "text/plain", "oops", 500, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			odd := atomic.Bool{}
			odd.Store(true)
			url := interceptedServer(t, func(w http.ResponseWriter, id json.RawMessage) bool {
				if !odd.Load() {
					return false
				}
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, strings.ReplaceAll(tt.body, "$ID", string(id)))
				return true
			})
			e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 1}}, mcpproxy.Connection{BaseURL: url})
			if r := e.call("agent", "a.echo", `{"text":"x"}`); r.status != http.StatusBadGateway || r.body["code"] != "UPSTREAM_ERROR" {
				t.Fatalf("call = %d %s", r.status, r.raw)
			}
			// Through the endpoint's SDK path too (a progress token), where
			// a panic would end the process.
			cs := e.mustConnect(t, who{"ns1", "agent", "k"}, nil)
			params := &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "x"}}
			params.SetProgressToken("p")
			if _, err := cs.CallTool(context.Background(), params); err == nil {
				t.Errorf("endpoint call succeeded")
			}
			odd.Store(false)
			r := e.call("agent", "a.echo", `{"text":"x"}`)
			if tt.serverAnswered != (r.status == http.StatusOK) {
				t.Errorf("after answers the server made (%v), the breaker of 1 let a call through: %v (%d %s)", tt.serverAnswered, r.status == http.StatusOK, r.status, r.raw)
			}
			if got := e.proxy.SessionState("mcp1"); tt.serverAnswered && got != mcpproxy.SessionReady {
				t.Errorf("session %s after the server's verdict, want ready", got)
			}
		})
	}
}

// Upstream sessions work with a stateless server, whatever protocol
// versions it offers.
func TestUpstreamStatelessServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})
	if r := e.call("agent", "a.echo", `{"text":"hi"}`); r.status != http.StatusOK || !strings.Contains(r.raw, `"hi"`) {
		t.Fatalf("call = %d %s", r.status, r.raw)
	}

	// A server limited to the newest protocol refuses the gateway's first
	// handshake; the second, in the SDK's version, works.
	newest := mcp.NewServer(&mcp.Implementation{Name: "newest", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2026-07-28"}})
	mcp.AddTool(newest, &mcp.Tool{Name: "a.echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newest }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	e = newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})
	if r := e.call("agent", "a.echo", `{"text":"hi"}`); r.status != http.StatusOK || !strings.Contains(r.raw, `"hi"`) {
		t.Fatalf("call to a server of the newest protocol only = %d %s", r.status, r.raw)
	}
}

// The gateway's client offers the server what the agent offered (here the
// go-sdk client's default, roots) and answers a ping during a call; the progress an upstream sends reaches the
// agent without the upstream's _meta; a call that outlasts the idle
// timeout keeps its session.
func TestUpstreamRequestsDuringACall(t *testing.T) {
	t.Parallel()
	const idle = 250 * time.Millisecond
	s := mcp.NewServer(&mcp.Implementation{Name: "curious", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ping"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		err := req.Session.Ping(ctx, nil)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, err
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Meta: mcp.Meta{"leak": "sk-upstream-secret"}})
		} else {
			time.Sleep(2 * idle)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	capabilities := make(chan string, 2) // the agent session's own upstream session
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string
			Params struct{ Capabilities json.RawMessage }
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "initialize" {
			capabilities <- string(msg.Params.Capabilities)
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{SessionIdleTimeout: idle}}, mcpproxy.Connection{BaseURL: srv.URL, Redact: []string{"sk-upstream-secret"}})

	progress := make(chan *mcp.ProgressNotificationParams, 1)
	cs := e.mustConnect(t, alice, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("ping during a call = %+v, %v", res, err)
	}
	if caps := <-capabilities; caps != `{"roots":{"listChanged":true}}` {
		t.Errorf("the gateway's client offers capabilities %s, not the agent's", caps)
	}
	// Directly answered, and longer than the idle timeout.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("slow call = %+v, %v", res, err)
	}
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
	params.SetProgressToken("mine")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatalf("slow call with progress: %v", err)
	}
	select {
	case p := <-progress:
		if p.ProgressToken != "mine" || len(p.Meta) > 0 {
			t.Errorf("progress = %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no progress")
	}
}
