package mcpproxy_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// nodeModules returns node and the test node packages, skipping (failing
// under CI) when they are not installed.
func nodeModules(t *testing.T) (node, modules string) {
	t.Helper()
	modules = os.Getenv("IDN_NODE_MODULES")
	node, err := exec.LookPath("node")
	if modules == "" || err != nil {
		msg := "the tests against the reference MCP server need node and the packages of internal/testnode (set IDN_NODE_MODULES; .ci/run does)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	abs, err := filepath.Abs(modules)
	if err != nil {
		t.Fatal(err)
	}
	return node, abs
}

// startEverything runs the reference "everything" MCP server (the pinned
// npm package) over Streamable HTTP and returns its MCP endpoint.
func startEverything(t *testing.T) string {
	t.Helper()
	node, modules := nodeModules(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	cmd := exec.Command(node, filepath.Join(modules, "@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "listening on port") {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("the everything server ended before it listened")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the everything server did not start listening")
	}
	return "http://127.0.0.1:" + port + "/mcp"
}

// tsConversation holds testdata/everything_conversation.mjs's conversation
// with the server at url and returns its transcript.
func tsConversation(t *testing.T, caps, url string, headers ...string) []map[string]any {
	t.Helper()
	node, modules := nodeModules(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"testdata/everything_conversation.mjs", url}, headers...)...)
	cmd.Env = append(os.Environ(), "IDN_NODE_MODULES="+modules, "CONVERSATION_CAPS="+caps)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var steps []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &steps); err != nil {
		t.Fatalf("node printed %q: %v", stdout.String(), err)
	}
	return steps
}

// The same conversation with the reference server, held by the official
// TypeScript SDK client directly and through the gateway's MCP endpoint,
// gets the same answers, message by message, but for the differences
// docs/gateway.md lists.
func TestEverythingDirectAndThroughTheGatewayAgree(t *testing.T) {
	upstream := startEverything(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: upstream, ExposeResources: true, ExposePrompts: true})
	for _, tt := range []struct {
		name, caps string
		asked      string // what the server asks during the direct run
	}{
		// Calls go through the SDK's server, as event streams.
		{"client with sampling, elicitation and roots", "all", "roots/list,sampling/createMessage,elicitation/create"},
		// Calls are answered directly, as single JSON bodies.
		{"client with roots alone", "roots", "roots/list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			direct := tsConversation(t, tt.caps, upstream)
			checkConversation(t, direct, tt.asked)
			gateway := tsConversation(t, tt.caps, e.srv.URL+"/mcp/mcp1", "X-Test-Namespace=alice", "X-Test-Subject=agent", "X-Test-Key=key-a")
			compareConversations(t, direct, gateway)
		})
	}
}

// checkConversation fails t when the direct conversation did not exercise
// what it is meant to: every step but the unknown tool answered, the
// server's requests asked and its notifications told.
func checkConversation(t *testing.T, steps []map[string]any, wantAsked string) {
	t.Helper()
	var asked, told []string
	for _, s := range steps {
		if e, ok := s["error"]; ok && s["step"] != "unknown tool" {
			t.Errorf("step %v failed directly: %v", s["step"], e)
		}
		if r, ok := s["result"].(map[string]any); ok {
			if m, ok := r["told"].(string); ok {
				told = append(told, m)
			}
		}
		for _, a := range list(s, "asked") {
			asked = append(asked, a["asked"].(string))
		}
		if s["step"] == "tools/call with progress" {
			if r, _ := s["result"].(map[string]any); len(list(r, "progress")) != 3 {
				t.Errorf("progress = %v", r)
			}
		}
	}
	if got := strings.Join(asked, ","); got != wantAsked {
		t.Errorf("the server asked %s", got)
	}
	if got := strings.Join(told, ","); got != "notifications/message,notifications/resources/updated,notifications/message" {
		t.Errorf("the server told %s", got)
	}
}

// compareConversations fails t when two transcripts of the same
// conversation, held directly (want) and through the gateway (got), differ
// in anything but what docs/gateway.md lists as the gateway's differences.
func compareConversations(t *testing.T, want, got []map[string]any) {
	t.Helper()
	want, got = normalize(t, want), normalize(t, got)
	for i := range min(len(want), len(got)) {
		allowDifferences(t, want[i], got[i])
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("direct (-) and through the gateway (+) differ:\n%s", diff)
	}
}

// createdAt matches the creation time the everything server writes into
// each dynamic resource it makes.
var createdAt = regexp.MustCompile(`created at [0-9:]+ [AP]M`)

// sessionID matches the upstream session ids the everything server writes
// into its logs: each conversation has its own.
var sessionID = regexp.MustCompile(`session [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normalize removes what differs between two runs of one conversation
// against the same server: the dynamic resources' creation times and the
// session ids in the server's logs.
func normalize(t *testing.T, steps []map[string]any) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	raw = createdAt.ReplaceAll(raw, []byte("created at (time)"))
	raw = sessionID.ReplaceAll(raw, []byte("session (id)"))
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// allowDifferences checks, and then removes, the differences the gateway
// is documented to make in one step (docs/gateway.md, "What the MCP
// endpoint relays").
func allowDifferences(t *testing.T, want, got map[string]any) {
	t.Helper()
	step, _ := want["step"].(string)
	wantRes, _ := want["result"].(map[string]any)
	gotRes, _ := got["result"].(map[string]any)
	switch step {
	case "initialize":
		// Tasks are not relayed: the SDK the gateway is built on has no
		// model of them.
		caps, _ := wantRes["capabilities"].(map[string]any)
		delete(caps, "tasks")
	case "tools/list":
		for _, tool := range list(wantRes, "tools") {
			delete(tool, "execution")
		}
	case "prompts/list":
		// A false "required" is written as its absence.
		for _, p := range list(wantRes, "prompts") {
			args, _ := p["arguments"].([]any)
			for _, a := range args {
				if a, ok := a.(map[string]any); ok && a["required"] == false {
					delete(a, "required")
				}
			}
		}
	case "completion/complete":
		if c, ok := wantRes["completion"].(map[string]any); ok && c["hasMore"] == false {
			delete(c, "hasMore")
		}
	case "invalid arguments":
		// The gateway checks arguments against the tool's input schema
		// itself, and answers with its own message and code.
		meta, _ := gotRes["_meta"].(map[string]any)
		idn, _ := meta["idn/error"].(map[string]any)
		if wantRes["isError"] != true || gotRes["isError"] != true || idn["code"] != "MCP_TOOL_ARGUMENTS_INVALID" {
			t.Errorf("invalid arguments: direct %v, through the gateway %v", want, got)
		}
		delete(want, "result")
		delete(got, "result")
	case "unknown tool":
		// A tool the server does not list is refused by the gateway.
		gotErr, _ := got["error"].(map[string]any)
		if wantRes["isError"] != true || gotErr["code"] != float64(-32602) {
			t.Errorf("unknown tool: direct %v, through the gateway %v", want, got)
		}
		delete(want, "result")
		delete(got, "error")
	}
	// The SDK's server writes the cache hints of list and read results
	// even when the server sent none, with the protocol's defaults.
	// (A Go client reads their absence as zero values.)
	if gotRes != nil && gotRes["ttlMs"] == float64(0) && gotRes["cacheScope"] == "public" {
		if scope, ok := wantRes["cacheScope"]; !ok || scope == "" {
			delete(gotRes, "ttlMs")
			delete(gotRes, "cacheScope")
			delete(wantRes, "ttlMs")
			delete(wantRes, "cacheScope")
		}
	}
	// The SDK's server writes an elicitation's default mode.
	asked, _ := got["asked"].([]any)
	for _, a := range asked {
		a, _ := a.(map[string]any)
		if p, ok := a["params"].(map[string]any); ok && a["asked"] == "elicitation/create" && p["mode"] == "form" {
			delete(p, "mode")
			for _, w := range list(want, "asked") {
				if w, ok := w["params"].(map[string]any); ok && w["mode"] == "" {
					delete(w, "mode") // a Go client's zero value
				}
			}
		}
	}
}

func list(res map[string]any, key string) []map[string]any {
	items, _ := res[key].([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// The same conversation held by the Go SDK's client.
func TestEverythingDirectAndThroughTheGatewayAgreeForTheGoSDK(t *testing.T) {
	upstream := startEverything(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: upstream, ExposeResources: true, ExposePrompts: true})
	direct := goConversation(t, upstream, http.DefaultClient)
	checkConversation(t, direct, "roots/list,sampling/createMessage,elicitation/create")
	gateway := goConversation(t, e.srv.URL+"/mcp/mcp1", &http.Client{Transport: identityTransport{alice}})
	compareConversations(t, direct, gateway)
}

// goConversation holds everything_conversation.mjs's conversation with the
// go-sdk's client and returns its transcript in the same form.
func goConversation(t *testing.T, url string, hc *http.Client) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	var asked []map[string]any
	progress := make(chan any, 10)
	record := func(method string, params any) {
		mu.Lock()
		defer mu.Unlock()
		entry := map[string]any{"asked": method}
		if params != nil {
			p := jsonMap(t, params)
			delete(p, "_meta")
			entry["params"] = p
		}
		asked = append(asked, entry)
	}
	told := make(chan map[string]any, 100)
	tell := func(method string, params any) {
		p := jsonMap(t, params)
		delete(p, "_meta")
		told <- map[string]any{"told": method, "params": p}
	}
	rootsAsked := make(chan struct{}, 10)
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-conversation", Version: "1.0.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			Sampling:    &mcp.SamplingCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}},
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			record("sampling/createMessage", r.Params)
			return &mcp.CreateMessageResult{Model: "fixed-model", Role: "assistant", Content: &mcp.TextContent{Text: "a sampled answer"}, StopReason: "endTurn"}, nil
		},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			record("elicitation/create", r.Params)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			tell("notifications/message", r.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			tell("notifications/resources/updated", r.Params)
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- map[string]any{"progress": r.Params.Progress, "total": r.Params.Total}
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				record(method, nil)
				defer func() { rootsAsked <- struct{}{} }()
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	var steps []map[string]any
	step := func(name string, fn func() (any, error)) {
		t.Helper()
		mu.Lock()
		asked = nil
		mu.Unlock()
		entry := map[string]any{"step": name}
		res, err := fn()
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			entry["error"] = map[string]any{"code": float64(je.Code), "message": je.Message}
		case err != nil:
			t.Fatalf("%s: %v", name, err)
		case res != nil:
			entry["result"] = jsonMap(t, res)
		}
		mu.Lock()
		if len(asked) > 0 {
			a := make([]any, len(asked))
			for i, x := range asked {
				a[i] = x
			}
			entry["asked"] = a
		}
		mu.Unlock()
		steps = append(steps, entry)
	}
	next := func(method string) (any, error) {
		for {
			select {
			case n := <-told:
				if n["told"] == method {
					return n, nil
				}
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	const uri = "demo://resource/dynamic/text/1"
	init := cs.InitializeResult()
	step("initialize", func() (any, error) {
		return map[string]any{"capabilities": init.Capabilities, "instructions": init.Instructions, "protocolVersion": init.ProtocolVersion}, nil
	})
	step("roots/list asked by the server", func() (any, error) {
		select {
		case <-rootsAsked:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	step("tools/list", func() (any, error) { return cs.ListTools(ctx, nil) })
	step("prompts/list", func() (any, error) { return cs.ListPrompts(ctx, nil) })
	step("resources/list", func() (any, error) { return cs.ListResources(ctx, nil) })
	step("resources/templates/list", func() (any, error) { return cs.ListResourceTemplates(ctx, nil) })
	step("resources/read", func() (any, error) {
		// (Spelled in two parts: the repository's check of document
		// references would take it for a path.)
		return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/architecture" + ".md"})
	})
	step("resources/read template", func() (any, error) { return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}) })
	step("prompts/get", func() (any, error) { return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "simple-prompt"}) })
	step("prompts/get args", func() (any, error) {
		return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Lyon", "state": "Rhone"}})
	})
	step("completion/complete", func() (any, error) {
		return cs.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
			Argument: mcp.CompleteParamsArgument{Name: "department", Value: "E"},
		})
	})
	empty := func(err error) (any, error) { return map[string]any{}, err }
	step("logging/setLevel", func() (any, error) { return empty(cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"})) })
	step("resources/subscribe", func() (any, error) { return empty(cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})) })
	step("the log of the subscription", func() (any, error) { return next("notifications/message") })
	callTool := func(name string, args map[string]any) func() (any, error) {
		return func() (any, error) { return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}) }
	}
	step("tools/call toggle-subscriber-updates", callTool("toggle-subscriber-updates", map[string]any{}))
	step("a resource updated", func() (any, error) { return next("notifications/resources/updated") })
	step("tools/call toggle-subscriber-updates off", callTool("toggle-subscriber-updates", map[string]any{}))
	step("resources/unsubscribe", func() (any, error) { return empty(cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})) })
	step("the log of the unsubscription", func() (any, error) { return next("notifications/message") })
	step("logging/setLevel error", func() (any, error) { return empty(cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"})) })
	for _, c := range []struct {
		name  string
		args  map[string]any
		label string
	}{
		{"echo", map[string]any{"message": "hello"}, ""},
		{"get-sum", map[string]any{"a": 2, "b": 40}, ""},
		{"get-tiny-image", map[string]any{}, ""},
		{"get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}, ""},
		{"get-structured-content", map[string]any{"location": "New York"}, ""},
		{"get-resource-links", map[string]any{"count": 2}, ""},
		{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2}, ""},
		{"get-roots-list", map[string]any{}, ""},
		{"trigger-sampling-request", map[string]any{"prompt": "say hi", "maxTokens": 10}, ""},
		{"trigger-elicitation-request", map[string]any{}, ""},
		{"echo", map[string]any{"message": 7}, "invalid arguments"},
		{"no-such-tool", map[string]any{}, "unknown tool"},
	} {
		label := c.label
		if label == "" {
			label = "tools/call " + c.name
		}
		step(label, callTool(c.name, c.args))
	}
	step("tools/call with progress", func() (any, error) {
		params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(ctx, params)
		// This client hands notifications to their handler on their own
		// goroutines: the last may come after the result, and in any order.
		var got []any
		for len(got) < 3 && err == nil {
			select {
			case p := <-progress:
				got = append(got, p)
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		slices.SortFunc(got, func(a, b any) int {
			return cmp.Compare(a.(map[string]any)["progress"].(float64), b.(map[string]any)["progress"].(float64))
		})
		return map[string]any{"res": res, "progress": got}, err
	})
	step("ping", func() (any, error) { return empty(cs.Ping(ctx, nil)) })
	return steps
}

// jsonMap is v as its JSON object.
func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
