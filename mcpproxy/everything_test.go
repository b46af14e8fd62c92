package mcpproxy_test

//lint:file-ignore SA1019 the tests drive sampling, roots and logging, which the SDK deprecates for the newest protocol version only.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/internal/mcpconversation"
	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The same conversation with the reference server, held by the official
// TypeScript SDK client directly and through the gateway's MCP endpoint,
// gets the same answers, message by message, but for the differences
// docs/gateway.md lists.
func TestEverythingDirectAndThroughTheGatewayAgree(t *testing.T) {
	upstream := mcpconversation.StartEverything(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: upstream, ExposeResources: true, ExposePrompts: true})
	for _, tt := range []struct {
		name, caps string
		asked      string // what the server asks during the direct run
	}{
		// Calls go through the SDK's server, as event streams; a task asks
		// for input (elicitation) while its result is awaited.
		{"client with sampling, elicitation and roots", "all", "roots/list,sampling/createMessage,elicitation/create,elicitation/create,sampling/createMessage,elicitation/create"},
		// Calls are answered directly, as single JSON bodies.
		{"client with roots alone", "roots", "roots/list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			direct := mcpconversation.TypeScript(t, tt.caps, nil, "http", upstream)
			mcpconversation.Check(t, direct, tt.asked)
			gateway := mcpconversation.TypeScript(t, tt.caps, nil, "http", e.srv.URL+"/mcp/mcp1", "X-Test-Namespace=alice", "X-Test-Subject=agent", "X-Test-Key=key-a")
			mcpconversation.Compare(t, direct, gateway)
		})
	}
}

// The same conversation held by the Go SDK's client, which also changes
// its roots (the server asks for them again) and answers the server's
// elicitation form with two of its fields (the server gets those alone,
// in the agent's order: no defaults of the form filled in).
func TestEverythingDirectAndThroughTheGatewayAgreeForTheGoSDK(t *testing.T) {
	upstream := mcpconversation.StartEverything(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: upstream, ExposeResources: true, ExposePrompts: true})
	direct := goConversation(t, upstream, http.DefaultClient)
	mcpconversation.Check(t, direct, "roots/list,roots/list,sampling/createMessage,elicitation/create,elicitation/create")
	gateway := goConversation(t, e.srv.URL+"/mcp/mcp1", &http.Client{Transport: identityTransport{alice}})
	mcpconversation.Compare(t, direct, gateway)
}

// elicitationProbe is the message of the reference server's elicitation
// form (tool trigger-elicitation-request), which goConversation answers
// with two of its fields.
const elicitationProbe = "Please provide inputs for the following fields:"

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
	// The SDK has no model of tasks: their methods are custom ones.
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"} {
		if err := mcp.AddSendingCustomMethod[*taskParams, *anyResult](client, method); err != nil {
			t.Fatal(err)
		}
	}
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "roots/list" {
				record(method, nil)
				defer func() { rootsAsked <- struct{}{} }()
			}
			if p, ok := req.GetParams().(*mcp.ElicitParams); ok && method == "elicitation/create" && p.Message == elicitationProbe {
				// Two of the form's fields, as an agent may answer: the
				// server gets them alone, its defaults not filled in (this
				// client's SDK would fill them in itself).
				record(method, p)
				return &mcptasks.Result{Raw: json.RawMessage(`{"action":"accept","content":{"name":"Ada","check":true}}`)}, nil
			}
			return next(ctx, method, req)
		}
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, session2025)
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
	step("roots/list asked again after roots/list_changed", func() (any, error) {
		client.AddRoots(&mcp.Root{URI: "file:///work/other", Name: "other"})
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
	// A task, as conversation.mjs runs it; a task-augmented call is sent
	// as JSON, since the SDK's client would drop the task.
	callAsTask := func(topic string) (map[string]any, error) {
		return rawCall(ctx, t, hc, url, cs, map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": topic}, "task": map[string]any{"ttl": 60000}})
	}
	withoutMessage := func(m map[string]any) map[string]any {
		delete(m, "statusMessage")
		return m
	}
	custom := func(method string, params *taskParams) (map[string]any, error) {
		res, err := mcp.CallCustomMethod[*taskParams, *anyResult](ctx, cs, method, params)
		if err != nil {
			return nil, err
		}
		return res.v, nil
	}
	var taskID string
	step("tools/call as a task", func() (any, error) {
		res, err := callAsTask("gateways")
		if err == nil {
			task, _ := res["task"].(map[string]any)
			taskID, _ = task["taskId"].(string)
			withoutMessage(task)
		}
		return res, err
	})
	step("tasks/get", func() (any, error) {
		res, err := custom("tasks/get", &taskParams{TaskID: taskID})
		return withoutMessage(res), err
	})
	step("tasks/result", func() (any, error) { return custom("tasks/result", &taskParams{TaskID: taskID}) })
	step("tasks/list", func() (any, error) { return custom("tasks/list", &taskParams{}) })
	step("tasks/cancel of a finished task", func() (any, error) { return custom("tasks/cancel", &taskParams{TaskID: taskID}) })
	step("tasks/cancel", func() (any, error) {
		created, err := callAsTask("cancelled")
		if err != nil {
			return nil, err
		}
		id, _ := created["task"].(map[string]any)["taskId"].(string)
		res, err := custom("tasks/cancel", &taskParams{TaskID: id})
		return withoutMessage(res), err
	})
	step("tasks/get of an unknown task", func() (any, error) { return custom("tasks/get", &taskParams{TaskID: "no-such-task"}) })
	step("tasks/result of a task that asks", func() (any, error) {
		created, err := rawCall(ctx, t, hc, url, cs, map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "python", "ambiguous": true}, "task": map[string]any{"ttl": 60000}})
		if err != nil {
			return nil, err
		}
		id, _ := created["task"].(map[string]any)["taskId"].(string)
		return custom("tasks/result", &taskParams{TaskID: id})
	})
	step("ping", func() (any, error) { return empty(cs.Ping(ctx, nil)) })
	return steps
}

// taskParams are the params of the tasks methods.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId,omitempty"`
}

// anyResult is a result as JSON.
type anyResult struct {
	mcp.ResultBase
	v map[string]any
}

func (r *anyResult) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &r.v) }

// rawCall sends a tools/call with params on cs's session as JSON, and
// returns its result or its error as a *jsonrpc.Error.
func rawCall(ctx context.Context, t *testing.T, hc *http.Client, url string, cs *mcp.ClientSession, params map[string]any) (map[string]any, error) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "raw", "method": "tools/call", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				raw = []byte(v)
			}
		}
	}
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *jsonrpc.Error `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("tools/call answered %d %q", resp.StatusCode, raw)
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	return msg.Result, nil
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
