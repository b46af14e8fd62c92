package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessUpstream is a go-sdk server (in sessions of 2025-11-25) that
// wants the gateway's credential: docs.search echoes, slow.count reports
// progress, confirm asks its client (elicitation) before it answers and
// reports the answer's content as it got it, admin.wipe is denied, and
// wait signals started, then runs until it is cancelled and signals
// cancelled.
// With versions set, the server speaks those alone, statelessly.
func statelessUpstream(t *testing.T, versions ...string) (url string, started, cancelled <-chan struct{}) {
	s := mcp.NewServer(&mcp.Implementation{Name: "docs-upstream", Version: "1.0.0"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "docs.search", Description: "finds documents"}, func(_ context.Context, _ *mcp.CallToolRequest, a text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found:" + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "admin.wipe"}, func(context.Context, *mcp.CallToolRequest, text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow.count"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			for i := 1; i <= 2; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 2})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "confirm"}, func(ctx context.Context, req *mcp.CallToolRequest, a text) (*mcp.CallToolResult, any, error) {
		if answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
			raw, _ := json.Marshal(answer.Content)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer.Action + " " + string(raw)}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Message:         "really send " + a.Text + "?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
		}}}, nil, nil
	})
	begun, done := make(chan struct{}, 1), make(chan struct{}, 1)
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		begun <- struct{}{}
		<-ctx.Done()
		done <- struct{}{}
		return nil, nil, ctx.Err()
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: len(versions) > 0})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, begun, done
}

// newStatelessStack is a gateway with the MCP connection "docs" (admin.*
// denied) in front of statelessUpstream speaking versions.
func newStatelessStack(t *testing.T, versions ...string) *mcpStack {
	t.Helper()
	url, started, cancelled := statelessUpstream(t, versions...)
	st := newMCPStackFor(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: url,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", Extensions: mcpproxy.Settings{ToolDenylist: []string{"admin.*"}}.Members()})
	st.started, st.cancelled = started, cancelled
	return st
}

// statelessConversation is one conversation of the go-sdk client speaking
// 2026-07-28 over t: discovery, the listing, calls (one reporting
// progress, one asking the agent, answered in rounds, one denied), and
// what the client saw of it.
func statelessConversation(t *testing.T, transport mcp.Transport) []any {
	t.Helper()
	return conversationIn(t, transport, statelessRevision)
}

// conversationIn is statelessConversation's conversation in version: of
// 2025-11-25, a session's initialize, and the server's ask put to the
// client as an elicitation request.
func conversationIn(t *testing.T, transport mcp.Transport, version string) []any {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var seen []any
	note := func(v any) {
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
	}
	// The go-sdk's client may handle a notification after the response
	// read behind it: the conversation awaits the call's progress.
	progressed := make(chan struct{}, 2)
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			note(r.Params)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			note(r.Params)
			progressed <- struct{}{}
		},
	})
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	init := cs.InitializeResult()
	if init.ProtocolVersion != version {
		t.Fatalf("negotiated %q, want %q", init.ProtocolVersion, version)
	}
	got := []any{init}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, list)
	progress := &mcp.CallToolParams{Name: "slow.count", Arguments: map[string]any{}}
	progress.SetProgressToken("p1")
	for _, params := range []*mcp.CallToolParams{
		{Name: "docs.search", Arguments: map[string]any{"text": "go"}},
		{Name: "confirm", Arguments: map[string]any{"text": "the report"}},
		progress,
	} {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", params.Name, err)
		}
		got = append(got, res)
	}
	for range 2 {
		select {
		case <-progressed:
		case <-time.After(10 * time.Second):
			t.Fatal("slow.count's progress never reached the client")
		}
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin.wipe", Arguments: map[string]any{"text": "x"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), "MCP_TOOL_FORBIDDEN") {
		t.Errorf("denied tool: %v", err)
	}
	got = append(got, je.Code, je.Message, strings.Contains(string(je.Data), "MCP_TOOL_FORBIDDEN")) // request_id differs
	mu.Lock()
	got = append(got, seen)
	mu.Unlock()
	// Compared as the JSON the client's types hold.
	var asJSON []any
	if err := json.Unmarshal(mustJSON(t, got), &asJSON); err != nil {
		t.Fatal(err)
	}
	return asJSON
}

// A stdio client of the stateless revision (the go-sdk client, 2026-07-28,
// no initialize) through idn mcp gets what it gets talking to the gateway
// directly: the same discovery, listing, calls, rounds and progress.
func TestMCPBridgeStatelessRevision(t *testing.T) {
	for _, tt := range []struct {
		era      string
		versions []string
	}{
		{"a server of 2025-11-25 sessions", nil},
		{"a stateless server of both eras", mcp.SupportedProtocolVersions()},
		{"a server of 2026-07-28 alone", []string{statelessRevision}},
	} {
		t.Run(tt.era, func(t *testing.T) { bridgesStatelessRevision(t, tt.versions) })
	}
}

func bridgesStatelessRevision(t *testing.T, versions []string) {
	st := newStatelessStack(t, versions...)
	direct := statelessConversation(t, &mcp.StreamableClientTransport{
		Endpoint:   st.url + "/mcp/docs",
		HTTPClient: &http.Client{Transport: st.agent.Transport(nil, identity.SignOptions{})},
	})
	cmd := exec.Command(os.Args[0], "mcp", "--gateway", st.url, "--connection", "docs")
	cmd.Env = append(os.Environ(), "IDN_TEST_AS_IDN=1", "IDN_HOME="+st.home)
	bridged := statelessConversation(t, &mcp.CommandTransport{Command: cmd})
	if diff := gocmp.Diff(direct, bridged); diff != "" {
		t.Errorf("through idn mcp (-direct +bridged):\n%s", diff)
	}
	if s := direct[len(direct)-1].([]any); len(s) != 3 {
		t.Errorf("the client saw %d elicitations and progress notifications, want 3: %v", len(s), s)
	}
}

// A stdio client of 2025-11-25 through idn mcp gets what it gets talking
// to the gateway directly, message by message: the listing, calls, the
// server's ask (an elicitation request on the call's stream) and
// progress, whether the server keeps sessions or speaks 2026-07-28
// alone. The initialize result names idn mcp rather than the gateway.
func TestMCPBridgeSessionMatchesTheGateway(t *testing.T) {
	for _, tt := range []struct {
		era      string
		versions []string
	}{
		{"a server of 2025-11-25 sessions", nil},
		{"a server of 2026-07-28 alone", []string{statelessRevision}},
	} {
		t.Run(tt.era, func(t *testing.T) { sessionMatchesTheGateway(t, tt.versions) })
	}
}

func sessionMatchesTheGateway(t *testing.T, versions []string) {
	st := newStatelessStack(t, versions...)
	direct := conversationIn(t, &mcp.StreamableClientTransport{
		Endpoint:   st.url + "/mcp/docs",
		HTTPClient: &http.Client{Transport: st.agent.Transport(nil, identity.SignOptions{})},
	}, maxRelayedVersion)
	cmd := exec.Command(os.Args[0], "mcp", "--gateway", st.url, "--connection", "docs")
	cmd.Env = append(os.Environ(), "IDN_TEST_AS_IDN=1", "IDN_HOME="+st.home)
	bridged := conversationIn(t, &mcp.CommandTransport{Command: cmd}, maxRelayedVersion)
	for _, c := range [][]any{direct, bridged} {
		c[0].(map[string]any)["serverInfo"] = "(documented)"
	}
	if diff := gocmp.Diff(direct, bridged); diff != "" {
		t.Errorf("through idn mcp (-direct +bridged):\n%s", diff)
	}
	if s := direct[len(direct)-1].([]any); len(s) != 3 {
		t.Errorf("the client saw %d elicitations and progress notifications, want 3: %v", len(s), s)
	}
}

// The stateless revision's rounds pass idn mcp as JSON: the input_required
// result as the gateway wrote it, and the client's retry with its
// inputResponses and requestState, which is good once.
func TestMCPBridgeStatelessRounds(t *testing.T) {
	st := newStatelessStack(t)
	inW, outR, stderr := st.start(t)
	lines := json.NewDecoder(outR)
	next := func() map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := lines.Decode(&m); err != nil {
			t.Fatalf("reading idn mcp's stdout: %v (stderr %s)", err, stderr.String())
		}
		return m
	}
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"confirm","arguments":{"text":"it"},` + meta + `}}`)
	first := next()
	var round struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if string(first["id"]) != `"c1"` || json.Unmarshal(first["result"], &round) != nil || round.ResultType != "input_required" || round.RequestState == "" {
		t.Fatalf("first round: %s", first)
	}
	if len(round.InputRequests) != 1 {
		t.Fatalf("input requests %s", first["result"])
	}
	var key string
	for k, ask := range round.InputRequests {
		key = k
		if !strings.Contains(string(ask), `"method":"elicitation/create"`) || !strings.Contains(string(ask), `really send it?`) {
			t.Errorf("input request %s", ask)
		}
	}
	retry := `{"jsonrpc":"2.0","id":"ID","method":"tools/call","params":{"name":"confirm","arguments":{"text":"it"},` +
		`"inputResponses":{` + string(mustJSON(t, key)) + `:{"action":"accept","content":{"ok":true}}},"requestState":` + string(mustJSON(t, round.RequestState)) + `,` + meta + `}}`
	// The retry answers the server; it reports the answer it got.
	send(strings.Replace(retry, "ID", "c2", 1))
	second := next()
	if string(second["id"]) != `"c2"` || !strings.Contains(string(second["result"]), `accept {\"ok\":true}`) || !strings.Contains(string(second["result"]), `"resultType":"complete"`) {
		t.Fatalf("second round: %s", second)
	}
	// A state is good once: the same retry again is the gateway's error.
	send(strings.Replace(retry, "ID", "c3", 1))
	if third := next(); string(third["id"]) != `"c3"` || !strings.Contains(string(third["error"]), "requestState") {
		t.Fatalf("a spent state: %s", third)
	}
}

// A stateless request the stdio client withdraws (notifications/cancelled)
// ends its HTTP request, which cancels the tool upstream; it gets no
// answer, and the next request is served.
func TestMCPBridgeStatelessCancel(t *testing.T) {
	st := newStatelessStack(t)
	inW, outR, stderr := st.start(t)
	lines := json.NewDecoder(outR)
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait","arguments":{},` + meta + `}}`)
	<-st.started
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	<-st.cancelled
	send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"docs.search","arguments":{"text":"go"},` + meta + `}}`)
	var m map[string]json.RawMessage
	if err := lines.Decode(&m); err != nil {
		t.Fatalf("reading idn mcp's stdout: %v (stderr %s)", err, stderr.String())
	}
	if string(m["id"]) != "8" || !strings.Contains(string(m["result"]), "found:go") {
		t.Errorf("after the cancellation idn mcp wrote %s, want the answer to request 8", m)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A stdio client of the stateless revision through idn mcp holds no
// gateway session: the gateway holds the one lane its requests share, as
// for the same client talking to the gateway directly.
func TestMCPBridgeStatelessHoldsNoSession(t *testing.T) {
	st := newStatelessStack(t)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil)
	direct, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   st.url + "/mcp/docs",
		HTTPClient: &http.Client{Transport: st.agent.Transport(nil, identity.SignOptions{})},
	}, &mcp.ClientSessionOptions{ProtocolVersion: statelessRevision})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := st.sessions(t); n != 1 {
		t.Fatalf("the direct client left %d sessions on the gateway, want its lane", n)
	}
	st.version = statelessRevision
	bridged := st.bridge(t, nil)
	if _, err := bridged.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "go"}}); err != nil {
		t.Fatal(err)
	}
	if n := st.sessions(t); n != 1 {
		t.Errorf("with idn mcp running, the gateway holds %d sessions, want the lane alone", n)
	}
}
