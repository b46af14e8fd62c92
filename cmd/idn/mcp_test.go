package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/mcpproxy"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/mcpconversation"
	"github.com/idnhq/idn/kit/testnode"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets a test start this test binary as the idn command (for the
// TypeScript SDK's stdio transport, which spawns a process).
func TestMain(m *testing.M) {
	if os.Getenv("IDN_TEST_AS_IDN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

const upstreamToken = "up-secret-token-42"

// mcpUpstream is a go-sdk MCP server that wants the gateway's credential:
// docs.search echoes, slow.count reports progress n times, admin.wipe is
// there to be denied, and wait.cancel signals started, then runs until it
// is cancelled and signals cancelled.
func mcpUpstream(t *testing.T) (url string, started, cancelled <-chan struct{}) {
	s := mcp.NewServer(&mcp.Implementation{Name: "docs-upstream", Version: "1.0.0"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "docs.search", Description: "finds documents"}, func(_ context.Context, _ *mcp.CallToolRequest, a text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found:" + a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "admin.wipe"}, func(context.Context, *mcp.CallToolRequest, text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped"}}}, nil, nil
	})
	type count struct {
		N int `json:"n"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow.count"}, func(ctx context.Context, req *mcp.CallToolRequest, a count) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			for i := 1; i <= a.N; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(a.N), Message: "step"})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
	})
	begun, done := make(chan struct{}, 1), make(chan struct{}, 1)
	mcp.AddTool(s, &mcp.Tool{Name: "wait.cancel"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		begun <- struct{}{}
		<-ctx.Done()
		done <- struct{}{}
		return nil, nil, ctx.Err()
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken || r.Header.Get("Idn-Namespace") != "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, begun, done
}

// mcpStack is a gateway with one MCP connection "docs" (admin.* denied)
// in front of mcpUpstream, and an agent identity in home that the control
// plane approved for it.
type mcpStack struct {
	url, home          string
	version            string // that bridge's client asks for (zero: 2025-11-25)
	agent              *identity.Identity
	started, cancelled <-chan struct{}
}

func newMCPStack(t *testing.T, idle time.Duration) *mcpStack {
	t.Helper()
	upURL, started, cancelled := mcpUpstream(t)
	st := newMCPStackFor(t, idle, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upURL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", Extensions: mcpproxy.Settings{ToolDenylist: []string{"admin.*"}}.Members()})
	st.started, st.cancelled = started, cancelled
	return st
}

// newMCPStackFor is a gateway with the MCP connection conn (of service
// "docs") and an agent identity in home that the control plane approved
// for it.
func newMCPStackFor(t *testing.T, idle time.Duration, conn *credvault.Connection) *mcpStack {
	t.Helper()
	st, _ := newMCPStackWith(t, idle, conn, true, claimcache.Options{})
	return st
}

// newMCPStackWith is newMCPStackFor with the agent approved at once or
// not, and the gateway's claims options; it returns the control plane too.
func newMCPStackWith(t *testing.T, idle time.Duration, conn *credvault.Connection, approved bool, claims claimcache.Options) (*mcpStack, *claimcachetest.Server) {
	t.Helper()
	st := &mcpStack{home: t.TempDir()}
	var err error
	if st.agent, err = identity.New("desk-agent"); err != nil {
		t.Fatal(err)
	}
	if err := st.agent.Save(st.home); err != nil {
		t.Fatal(err)
	}
	controlPlane := claimcachetest.NewServer()
	t.Cleanup(controlPlane.Close)
	if approved {
		controlPlane.Approve(claimcache.Claim{Namespace: st.agent.Namespace, Service: "docs", PublicKey: st.agent.PublicKeyString()})
	}
	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: controlPlane.URL,
		MCP: mcpproxy.Options{SessionIdleTimeout: idle}, ServiceAPIKey: controlPlane.APIKey("docs"), Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	ctx := context.Background()
	conn.Service = "docs"
	_, err = gw.Vault().Create(ctx, conn, map[string]string{"token": upstreamToken})
	if err != nil {
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
	return st, controlPlane
}

// start runs `idn mcp` in-process on pipes, with args after the gateway's
// and the connection's, and returns its stdin, its stdout and its stderr.
// It must exit 0 once its stdin is closed, which the test's end does.
func (st *mcpStack) start(t *testing.T, args ...string) (stdin *io.PipeWriter, stdout *io.PipeReader, stderr *bytes.Buffer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr = &bytes.Buffer{}
	exited := make(chan int, 1)
	go func() {
		code := run(append([]string{"mcp", "--gateway", st.url, "--connection", "docs"}, args...),
			env{inR, outW, stderr, func(k string) string {
				if k == "IDN_HOME" {
					return st.home
				}
				return ""
			}})
		outW.Close()
		exited <- code
	}()
	t.Cleanup(func() {
		inW.Close()
		if code := <-exited; code != 0 {
			t.Errorf("idn mcp exited %d: %s", code, stderr.String())
		}
	})
	return inW, outR, stderr
}

// bridge runs `idn mcp` in-process on pipes and connects a go-sdk client
// to its stdio side.
func (st *mcpStack) bridge(t *testing.T, opts *mcp.ClientOptions, args ...string) *mcp.ClientSession {
	t.Helper()
	inW, outR, stderr := st.start(t, args...)
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts)
	version := st.version
	if version == "" {
		version = maxRelayedVersion
	}
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect through idn mcp: %v (stderr %s)", err, stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() }) // closes idn mcp's stdin
	return cs
}

func TestMCPBridge(t *testing.T) { testMCPBridge(t, maxRelayedVersion) }

// TestMCPBridge with a stdio client of the stateless revision.
func TestMCPBridgeStateless(t *testing.T) { testMCPBridge(t, statelessRevision) }

func testMCPBridge(t *testing.T, version string) {
	st := newMCPStack(t, 0)
	st.version = version
	ctx := context.Background()
	progress := make(chan *mcp.ProgressNotificationParams, 8)
	cs := st.bridge(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params },
	})

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "docs.search,slow.count,wait.cancel" {
		t.Errorf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "go"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "found:go" {
		t.Fatalf("docs.search = %+v, %v", res, err)
	}
	// The gateway's refusal reaches the desktop client with its code.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin.wipe", Arguments: map[string]any{"text": "x"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), "MCP_TOOL_FORBIDDEN") {
		t.Errorf("denied tool: %v", err)
	}
	params := &mcp.CallToolParams{Name: "slow.count", Arguments: map[string]any{"n": 2}}
	params.SetProgressToken(7)
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if p := <-progress; p.ProgressToken != float64(7) || p.Progress != float64(i) {
			t.Errorf("progress %d = %+v", i, p)
		}
	}
	// Cancelling on the stdio side cancels the upstream tool.
	cctx, cancel := context.WithCancel(ctx)
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "wait.cancel", Arguments: map[string]any{}})
		called <- err
	}()
	<-st.started
	cancel()
	<-st.cancelled
	if err := <-called; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call = %v", err)
	}
}

// A call's result reaches the stdio client only after the client has
// answered a ping sent after the call's last progress notification. A
// client may read progress and result in one chunk and handle the
// notification after the response (the TypeScript SDK does, and then
// drops it); the answer to the ping proves it handled what came before.
func TestMCPBridgeSettlesProgressBeforeTheResult(t *testing.T) {
	st := newMCPStack(t, 0)
	inW, outR, stderr := st.start(t)
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	lines := json.NewDecoder(outR)
	next := func() map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := lines.Decode(&m); err != nil {
			t.Fatalf("reading idn mcp's stdout: %v (stderr %s)", err, stderr.String())
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(); string(m["id"]) != "1" || m["result"] == nil {
		t.Fatalf("initialize answered %s", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow.count","arguments":{"n":3},"_meta":{"progressToken":"p"}}}`)
	var seen []string
	for {
		m := next()
		var method string
		_ = json.Unmarshal(m["method"], &method)
		switch {
		case method == "notifications/progress":
			seen = append(seen, "progress")
		case method == "ping":
			seen = append(seen, "ping")
			send(`{"jsonrpc":"2.0","id":` + string(m["id"]) + `,"result":{}}`)
		case string(m["id"]) == "2":
			seen = append(seen, "result")
			if want := "progress,progress,progress,ping,result"; strings.Join(seen, ",") != want {
				t.Errorf("idn mcp wrote %s, want %s", strings.Join(seen, ","), want)
			}
			return
		default:
			t.Fatalf("unexpected message %s", m)
		}
	}
}

// A gateway session that expired while the desktop client was idle is
// replaced under it.
func TestMCPBridgeOutlivesGatewaySession(t *testing.T) {
	st := newMCPStack(t, 50*time.Millisecond)
	cs := st.bridge(t, nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		st.awaitNoSession(t)
	}
}

// awaitNoSession waits until the gateway has expired every MCP session.
func (st *mcpStack) awaitNoSession(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(st.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "\nidn_gateway_mcp_sessions 0\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("MCP sessions never expired: %d %.300s", resp.StatusCode, body)
		}
	}
}

// An agent the gateway refuses learns why from idn mcp's message.
func TestMCPBridgeSaysWhyItCannotConnect(t *testing.T) {
	st := newMCPStack(t, 0)
	home := t.TempDir()
	if r := runIdn(t, home, "", "init", "unknown-agent"); r.code != 0 {
		t.Fatal(r)
	}
	r := runIdn(t, home, "", "mcp", "--gateway", st.url, "--connection", "docs")
	if r.code != 0 {
		t.Errorf("unapproved agent: %+v; idn mcp must stay up until its claim is approved", r)
	}
	r = runIdn(t, st.home, "", "mcp", "--gateway", st.url, "--connection", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "CONNECTION_NOT_FOUND") {
		t.Errorf("unknown connection: %+v", r)
	}
}

func TestMCPUsage(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{
		{"mcp"},
		{"mcp", "--gateway", "http://127.0.0.1:1"},
		{"mcp", "--connection", "docs"},
		{"mcp", "--gateway", "ftp://x", "--connection", "docs"},
	} {
		if r := runIdn(t, home, "", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := runIdn(t, home, "", "mcp", "-h"); r.code != 0 || !strings.Contains(r.stdout, "--connection") {
		t.Errorf("mcp -h: %+v", r)
	}
}

// tsResult is what testdata/mcp_client.mjs reports.
type tsResult struct {
	Server struct {
		Name string `json:"name"`
	} `json:"server"`
	Tools []string `json:"tools"`
	Call  struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"call"`
	Progress []struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
	} `json:"progress"`
	Denied struct {
		Code int `json:"code"`
		Data struct {
			Code string `json:"code"`
		} `json:"data"`
	} `json:"denied"`
	Invalid struct {
		IsError bool `json:"isError"`
	} `json:"invalid"`
}

// runTSClient runs testdata/mcp_client.mjs in mode against st.
func runTSClient(t *testing.T, st *mcpStack, mode string) tsResult {
	t.Helper()
	modules, node := testnode.Modules(t, "the TypeScript MCP SDK tests")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/mcp_client.mjs", mode, st.url, "docs")
	cmd.Env = append(os.Environ(),
		"IDN_NODE_MODULES="+modules,
		"IDN_HOME="+st.home,
		"IDN_BINARY="+os.Args[0],
		"IDN_TEST_AS_IDN=1", // for the idn the stdio transport starts, not for node
		"IDN_IDENTITY_FILE="+identity.Path(st.home, st.agent.Namespace),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", mode, err, stderr.String())
	}
	var res tsResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node %s printed %q: %v", mode, stdout.String(), err)
	}
	return res
}

func checkTSResult(t *testing.T, res tsResult) {
	t.Helper()
	if strings.Join(res.Tools, ",") != "docs.search,slow.count,wait.cancel" {
		t.Errorf("tools = %v", res.Tools)
	}
	if len(res.Call.Content) != 1 || res.Call.Content[0].Text != "found:hello" || res.Call.IsError {
		t.Errorf("docs.search = %+v", res.Call)
	}
	if len(res.Progress) != 3 || res.Progress[2].Progress != 3 || res.Progress[2].Total != 3 {
		t.Errorf("progress = %+v", res.Progress)
	}
	if res.Denied.Code != int(jsonrpc.CodeInvalidParams) || res.Denied.Data.Code != "MCP_TOOL_FORBIDDEN" {
		t.Errorf("denied tool = %+v", res.Denied)
	}
	if !res.Invalid.IsError {
		t.Errorf("invalid arguments were not a tool error: %+v", res.Invalid)
	}
}

// The official TypeScript SDK, through `idn mcp` over stdio, against a real
// go-sdk upstream behind a real gateway.
func TestTypeScriptSDKThroughIdnMCP(t *testing.T) {
	st := newMCPStack(t, 0)
	res := runTSClient(t, st, "stdio")
	checkTSResult(t, res)
	if res.Server.Name != "idn" {
		t.Errorf("server = %+v, want idn mcp", res.Server)
	}
}

// The official TypeScript SDK straight to the gateway's endpoint over
// Streamable HTTP, every request signed by a signer written in JavaScript
// from the profile.
func TestTypeScriptSDKOverSignedHTTP(t *testing.T) {
	st := newMCPStack(t, 0)
	res := runTSClient(t, st, "http")
	checkTSResult(t, res)
	if res.Server.Name != "idn-gateway" {
		t.Errorf("server = %+v, want the gateway", res.Server)
	}
}

// A hostile or spoofed gateway that answers 3xx gets no signed request for
// the URL it names, and idn mcp says it was redirected.
func TestMCPBridgeNeverFollowsARedirect(t *testing.T) {
	home := t.TempDir()
	if r := runIdn(t, home, "", "init", "desk-agent"); r.code != 0 {
		t.Fatal(r)
	}
	var mu sync.Mutex
	var signed []string
	realGateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Signature") != "" {
			mu.Lock()
			signed = append(signed, r.Method+" "+r.URL.String())
			mu.Unlock()
		}
	}))
	defer realGateway.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		spoofed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, realGateway.URL+"/proxy/bank/transfer", code)
		}))
		r := runIdn(t, home, "", "mcp", "--gateway", spoofed.URL, "--connection", "docs")
		if r.code != 1 || !strings.Contains(r.stderr, "redirect to") || !strings.Contains(r.stderr, strconv.Itoa(code)) {
			t.Errorf("spoofed gateway answering %d: %+v", code, r)
		}
		spoofed.Close()
	}
	if len(signed) != 0 {
		t.Errorf("the redirect target received signed requests: %q", signed)
	}
}

// The conversation with the reference everything server through idn mcp
// over stdio, behind a real gateway, gets the answers the direct
// conversation gets, but for the differences docs/gateway.md lists.
func TestEverythingThroughIdnMCP(t *testing.T) {
	upstream := mcpconversation.StartEverything(t)
	st := newMCPStackFor(t, 0, &credvault.Connection{ID: "everything", Protocol: credvault.ProtocolMCP, BaseURL: upstream,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", Extensions: mcpproxy.Settings{ExposeResources: true, ExposePrompts: true}.Members()})
	const asked = "roots/list,sampling/createMessage,elicitation/create,elicitation/create,sampling/createMessage,elicitation/create"
	direct := mcpconversation.TypeScript(t, "all", nil, "http", upstream)
	mcpconversation.Check(t, direct, asked)
	bridged := mcpconversation.TypeScript(t, "all", []string{
		"IDN_HOME=" + st.home,
		"IDN_BINARY=" + os.Args[0],
		"IDN_TEST_AS_IDN=1", // for the idn the stdio transport starts, not for node
	}, "stdio", st.url, "everything")
	// Over stdio the TypeScript client does not show the version it
	// settled on.
	for _, steps := range [][]map[string]any{direct, bridged} {
		if res, ok := steps[0]["result"].(map[string]any); ok {
			delete(res, "protocolVersion")
		}
	}
	mcpconversation.Compare(t, direct, bridged)
}

// An agent whose claim awaits approval keeps idn mcp up (issue 28, item
// 4): the client learns why from the server's instructions and a log
// message (the claim and where to approve it), sees no tools, and once the
// owner approves, is
// told by a log message and a tools/list_changed notification, and lists
// the tools; no restart.
func TestMCPBridgeWaitsForApproval(t *testing.T) { testMCPBridgeWaitsForApproval(t, maxRelayedVersion) }

// TestMCPBridgeWaitsForApproval with a client of the stateless revision:
// the gateway refuses its server/discover, and the go-sdk's client then
// falls back to initialize, which gets the session's wait.
func TestMCPBridgeWaitsForApprovalStateless(t *testing.T) {
	testMCPBridgeWaitsForApproval(t, statelessRevision)
}

func testMCPBridgeWaitsForApproval(t *testing.T, version string) {
	upURL, _, _ := mcpUpstream(t)
	st, controlPlane := newMCPStackWith(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upURL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, false, claimcache.Options{RefreshInterval: 100 * time.Millisecond})
	st.version = version
	changed, logged := make(chan struct{}, 4), make(chan string, 4)
	cs := st.bridge(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		//lint:ignore SA1019 desktop clients of the protocol versions idn mcp relays show log messages
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logged <- fmt.Sprint(r.Params.Data) },
	}, "--retry", "50ms")
	ctx := context.Background()

	init := cs.InitializeResult()
	for _, want := range []string{"AUTH_CLAIM_REQUIRED", "(claim clm_", "pending)", "[request req_", "dashboard", "no restart"} {
		if !strings.Contains(init.Instructions, want) {
			t.Errorf("instructions %q do not say %q", init.Instructions, want)
		}
	}
	if init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged {
		t.Errorf("capabilities %+v: tools must announce listChanged", init.Capabilities)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 0 {
		t.Fatalf("tools before approval: %+v, %v", list, err)
	}
	if list.CacheScope != "public" {
		t.Errorf("tools before approval have the cache scope %q, want the protocol's default", list.CacheScope)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "go"}}); err == nil ||
		!strings.Contains(err.Error(), "AUTH_CLAIM_REQUIRED") {
		t.Errorf("call before approval: %v, want the refusal", err)
	}

	controlPlane.Approve(claimcache.Claim{Namespace: st.agent.Namespace, Service: "docs", PublicKey: st.agent.PublicKeyString()})
	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatal("no tools/list_changed after the approval")
	}
	for _, want := range []string{"AUTH_CLAIM_REQUIRED", "the claim is approved"} {
		select {
		case msg := <-logged:
			if !strings.Contains(msg, want) {
				t.Errorf("log message %q, want it to say %q", msg, want)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("no log message saying %q", want)
		}
	}
	list, err = cs.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(list.Tools, func(tool *mcp.Tool) bool { return tool.Name == "docs.search" }) {
		t.Fatalf("tools after approval: %+v, %v", list, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "go"}})
	if err != nil || res.IsError {
		t.Fatalf("call after approval: %+v, %v", res, err)
	}
}

// A revoked agent keeps idn mcp up too: the client is told the claim was
// revoked, and once the owner approves the agent again it gets the tools,
// no restart.
func TestMCPBridgeWaitsForReapproval(t *testing.T) {
	upURL, _, _ := mcpUpstream(t)
	st, controlPlane := newMCPStackWith(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upURL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, false, claimcache.Options{RefreshInterval: 100 * time.Millisecond})
	tuple := claimcache.Claim{Namespace: st.agent.Namespace, Service: "docs", PublicKey: st.agent.PublicKeyString()}
	if approved := controlPlane.Approve(tuple); !controlPlane.Revoke(approved.ID) {
		t.Fatal("the approved claim could not be revoked")
	}
	changed := make(chan struct{}, 4)
	cs := st.bridge(t, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, "--retry", "50ms")
	if init := cs.InitializeResult(); !strings.Contains(init.Instructions, "AUTH_CLAIM_REVOKED") {
		t.Errorf("instructions %q do not say the claim was revoked", init.Instructions)
	}
	controlPlane.Approve(tuple)
	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatal("no tools/list_changed after the owner approved the agent again")
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(list.Tools, func(tool *mcp.Tool) bool { return tool.Name == "docs.search" }) {
		t.Fatalf("tools after the new approval: %+v, %v", list, err)
	}
}

// An agent whose claim the owner rejects while idn mcp waits is told so
// (a log message naming AUTH_CLAIM_REJECTED and the claim), and idn stops
// asking the gateway: a rejection is the owner's answer.
func TestMCPBridgeStopsWaitingWhenRejected(t *testing.T) {
	upURL, _, _ := mcpUpstream(t)
	st, controlPlane := newMCPStackWith(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upURL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, false, claimcache.Options{RefreshInterval: 100 * time.Millisecond})
	logged := make(chan string, 8)
	cs := st.bridge(t, &mcp.ClientOptions{
		//lint:ignore SA1019 desktop clients of the protocol versions idn mcp relays show log messages
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logged <- fmt.Sprint(r.Params.Data) },
	}, "--retry", "50ms")
	if init := cs.InitializeResult(); !strings.Contains(init.Instructions, "AUTH_CLAIM_REQUIRED") {
		t.Fatalf("instructions %q: the bridge does not wait", init.Instructions)
	}
	subs := controlPlane.Submissions()
	if len(subs) != 1 || !controlPlane.Reject(subs[0].ClaimID) {
		t.Fatalf("submissions %+v: no pending claim to reject", subs)
	}
	for {
		select {
		case msg := <-logged:
			if !strings.Contains(msg, "AUTH_CLAIM_REJECTED") {
				continue
			}
			if !strings.Contains(msg, subs[0].ClaimID) || !strings.Contains(msg, "stops asking") {
				t.Errorf("log message %q does not name the claim and say idn stopped asking", msg)
			}
			return
		case <-time.After(15 * time.Second):
			t.Fatal("no log message about the rejection")
		}
	}
}

// TestMCPBridgeWaitsForApproval with the official TypeScript SDK client
// over stdio, as a desktop client runs idn mcp.
func TestMCPBridgeWaitsForApprovalTypeScript(t *testing.T) {
	modules, node := testnode.Modules(t, "the TypeScript MCP SDK tests")
	upURL, _, _ := mcpUpstream(t)
	st, controlPlane := newMCPStackWith(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upURL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, false, claimcache.Options{RefreshInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/mcp_await.mjs", st.url, "docs")
	cmd.Env = append(os.Environ(), "IDN_NODE_MODULES="+modules, "IDN_HOME="+st.home, "IDN_BINARY="+os.Args[0],
		"IDN_TEST_AS_IDN=1") // for the idn the stdio transport starts, not for node
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var before struct {
		Instructions string                 `json:"instructions"`
		Capabilities mcp.ServerCapabilities `json:"capabilities"`
		Tools        []string               `json:"tools"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &before) != nil {
		t.Fatalf("node printed %q before the approval: %s", lines.Text(), stderr.String())
	}
	if !strings.Contains(before.Instructions, "AUTH_CLAIM_REQUIRED") || !strings.Contains(before.Instructions, "(claim clm_") ||
		before.Capabilities.Tools == nil || !before.Capabilities.Tools.ListChanged || len(before.Tools) != 0 {
		t.Errorf("before the approval: %+v", before)
	}
	controlPlane.Approve(claimcache.Claim{Namespace: st.agent.Namespace, Service: "docs", PublicKey: st.agent.PublicKeyString()})
	var after struct {
		Logged []string `json:"logged"`
		Tools  []string `json:"tools"`
		Call   struct {
			IsError bool `json:"isError"`
		} `json:"call"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &after) != nil {
		t.Fatalf("node printed %q after the approval: %s", lines.Text(), stderr.String())
	}
	if !slices.Contains(after.Tools, "docs.search") || after.Call.IsError || len(after.Logged) != 2 ||
		!strings.Contains(after.Logged[0], "AUTH_CLAIM_REQUIRED") || !strings.Contains(after.Logged[1], "the claim is approved") {
		t.Errorf("after the approval: %+v", after)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
}

// sessions is how many sessions (and lanes of the stateless revision)
// the gateway holds, as its metrics say.
func (st *mcpStack) sessions(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(st.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "idn_gateway_mcp_sessions "); ok {
			v, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("metric line %q", line)
			}
			return v
		}
	}
	t.Fatalf("no idn_gateway_mcp_sessions in the metrics: %d %.300s", resp.StatusCode, body)
	return 0
}
