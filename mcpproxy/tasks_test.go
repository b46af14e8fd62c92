package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/internal/mcptasks/mcptaskstest"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
)

const initializeTasks = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// openTasks opens an initialized session as w, speaking 2025-11-25, and
// returns its id and its initialize answer.
func openTasks(t testing.TB, e *env, w who) (string, map[string]any) {
	t.Helper()
	r := e.raw(t, w, "POST", "mcp1", "", initializeTasks)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || sid == "" {
		t.Fatalf("initialize as %v: %d %s", w, r.status, r.raw)
	}
	if n := e.raw(t, w, "POST", "mcp1", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", n.status, n.raw)
	}
	return sid, rpcBody(t, r)
}

// rpc sends one request on session sid as w and returns its answer's
// result, or its error.
func rpc(t testing.TB, e *env, w who, sid, method string, params any) (map[string]any, map[string]any) {
	t.Helper()
	body := mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
	r := e.raw(t, w, "POST", "mcp1", sid, string(body))
	if r.status != http.StatusOK {
		t.Fatalf("%s: %d %s", method, r.status, r.raw)
	}
	m := rpcBody(t, r)
	res, _ := m["result"].(map[string]any)
	rpcErr, _ := m["error"].(map[string]any)
	return res, rpcErr
}

// createTask makes a task-augmented call of work on session sid as w and
// returns the task's id.
func createTask(t testing.TB, e *env, w who, sid string) string {
	t.Helper()
	res, rpcErr := rpc(t, e, w, sid, "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"n": 1}, "task": map[string]any{"ttl": 1000}})
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("a task-augmented call answered %v, %v", res, rpcErr)
	}
	return id
}

// A server that offers tasks has them relayed: the tasks capability, each
// tool's execution, and task-augmented calls with their task, whichever
// paths the endpoint takes otherwise (the SDK's server cannot carry them,
// so they never go there).
func TestEndpointRelaysTasks(t *testing.T) {
	t.Parallel()
	for _, paths := range []struct{ sdkAgent, sdkUpstream bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("SDK agent side %v, SDK upstream side %v", paths.sdkAgent, paths.sdkUpstream), func(t *testing.T) {
			relaysTasks(t, paths.sdkAgent, paths.sdkUpstream)
		})
	}
}

func relaysTasks(t *testing.T, sdkAgent, sdkUpstream bool) {
	up := mcptaskstest.NewServer(t)
	var mu sync.Mutex
	var decisions []string
	e := newEnv(t, mcpproxy.Config{OnDecision: func(_ context.Context, ev mcpevent.Decision) {
		mu.Lock()
		defer mu.Unlock()
		decisions = append(decisions, ev.Method+" "+ev.Tool+" "+ev.Outcome)
	}}, mcpproxy.Connection{BaseURL: up.URL})
	mcpproxy.UseSDKPaths(e.proxy, sdkAgent, sdkUpstream)
	sid, init := openTasks(t, e, alice)
	caps := init["result"].(map[string]any)["capabilities"].(map[string]any)
	if got := jsonOf(t, caps["tasks"]); got != `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}` {
		t.Errorf("tasks capability = %s", got)
	}
	list, _ := rpc(t, e, alice, sid, "tools/list", map[string]any{})
	if got := jsonOf(t, list["tools"]); !containsAll(got, `"execution":{"taskSupport":"optional"}`, `"execution":{"taskSupport":"required"}`) {
		t.Errorf("tools/list = %s", got)
	}
	id := createTask(t, e, alice, sid)
	got, _ := rpc(t, e, alice, sid, "tasks/get", map[string]any{"taskId": id})
	if got["status"] != "working" {
		t.Errorf("tasks/get = %v", got)
	}
	res, _ := rpc(t, e, alice, sid, "tasks/result", map[string]any{"taskId": id})
	if jsonOf(t, res["_meta"]) != `{"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}}` {
		t.Errorf("tasks/result = %v", res)
	}
	cancelled, _ := rpc(t, e, alice, sid, "tasks/cancel", map[string]any{"taskId": id})
	if cancelled["status"] != "cancelled" {
		t.Errorf("tasks/cancel = %v", cancelled)
	}
	if n := e.metric("idn_gateway_mcp_tool_call_total", "task_created"); n != 1 {
		t.Errorf("task_created = %v", n)
	}
	if n := e.metric("idn_gateway_mcp_task_total", "success"); n != 3 {
		t.Errorf("idn_gateway_mcp_task_total{result=success} = %v, want 3 (get, result, cancel)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"tools/call work task_created", "tasks/get  success", "tasks/result  success", "tasks/cancel  success"} {
		if !slices.Contains(decisions, want) {
			t.Errorf("decisions %q lack %q", decisions, want)
		}
	}

	// An agent of a version without tasks is offered none.
	r := e.raw(t, bob, "POST", "mcp1", "", initialize)
	if caps := rpcBody(t, r)["result"].(map[string]any)["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Errorf("a 2025-06-18 agent was offered tasks: %v", caps)
	}
}

// A task id belongs to the agent session whose call created it: no other
// session, of another caller or of the same one, can read, wait for,
// cancel or list it, even when the server behind the gateway would let
// any of its sessions do so; none of their attempts reaches it, and each
// is a decision that says so.
func TestTaskIDsBelongToTheSessionThatCreatedThem(t *testing.T) {
	t.Parallel()
	up := mcptaskstest.NewServer(t)
	var mu sync.Mutex
	probes := map[string]int{}
	e := newEnv(t, mcpproxy.Config{OnDecision: func(_ context.Context, ev mcpevent.Decision) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Outcome == "not_owned" {
			probes[ev.Caller.Namespace+" "+ev.Method]++
		}
	}}, mcpproxy.Connection{BaseURL: up.URL})
	owner, _ := openTasks(t, e, alice)
	id := createTask(t, e, alice, owner)
	for _, tt := range []struct {
		name string
		who  who
	}{
		{"another caller reads a task it learned the id of", bob},
		{"the same caller's other session reads the task", alice},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sid, _ := openTasks(t, e, tt.who)
			for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
				res, rpcErr := rpc(t, e, tt.who, sid, method, map[string]any{"taskId": id})
				if rpcErr == nil || rpcErr["code"] != float64(-32602) {
					t.Errorf("%s of another session's task: %v, %v", method, res, rpcErr)
				}
			}
			if n := up.Received("tasks/get") + up.Received("tasks/result") + up.Received("tasks/cancel"); n != 0 {
				t.Errorf("%d requests about another session's task reached the server", n)
			}
			// Its own task is listed, the other's is not.
			mine := createTask(t, e, tt.who, sid)
			list, _ := rpc(t, e, tt.who, sid, "tasks/list", map[string]any{})
			if got := jsonOf(t, list["tasks"]); !containsAll(got, mine) || containsAll(got, `"`+id+`"`) {
				t.Errorf("tasks/list = %s", got)
			}
		})
	}
	if got, _ := rpc(t, e, alice, owner, "tasks/get", map[string]any{"taskId": id}); got["status"] != "working" {
		t.Errorf("the owner's tasks/get = %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if probes["bob tasks/get"] != 1 || probes["alice tasks/cancel"] != 1 || len(probes) != 6 {
		t.Errorf("probes decided as not_owned: %v", probes)
	}
}

// A task-augmented call takes the tool policy, the argument check and the
// rate limit as a plain call does, before anything goes upstream.
func TestTaskAugmentedCallsTakeThePolicy(t *testing.T) {
	t.Parallel()
	up := mcptaskstest.NewServer(t)
	// Two calls a minute: the unknown tool's takes one, as a call does.
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{RateLimitPerMinute: 2}}, mcpproxy.Connection{BaseURL: up.URL, Policy: mcpproxy.Policy{Deny: []string{"secret.*"}}})
	sid, _ := openTasks(t, e, alice)
	for _, tt := range []struct {
		name, tool string
		args       map[string]any
		code       string
	}{
		{"a denied tool called as a task", "secret.work", map[string]any{"n": 1}, "MCP_TOOL_FORBIDDEN"},
		{"an unknown tool called as a task", "nope", map[string]any{}, "MCP_TOOL_NOT_FOUND"},
		{"invalid arguments in a task", "work", map[string]any{"n": "one"}, "MCP_TOOL_ARGUMENTS_INVALID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, rpcErr := rpc(t, e, alice, sid, "tools/call", map[string]any{"name": tt.tool, "arguments": tt.args, "task": map[string]any{}})
			data, _ := rpcErr["data"].(map[string]any)
			if rpcErr == nil || data["code"] != tt.code {
				t.Errorf("answer %v, %v; want %s", res, rpcErr, tt.code)
			}
		})
	}
	// A task-augmented call the endpoint cannot answer as JSON is refused,
	// not handed to the SDK's server, which would run it as a plain call.
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/mcp/mcp1", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"work","arguments":{"n":1},"task":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := (&http.Client{Transport: identityTransport{alice}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a task-augmented call under another protocol version: %d", resp.StatusCode)
	}
	if n := up.Received("tools/call"); n != 0 {
		t.Errorf("%d refused calls reached the server", n)
	}
	createTask(t, e, alice, sid)
	_, rpcErr := rpc(t, e, alice, sid, "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"n": 1}, "task": map[string]any{}})
	if data, _ := rpcErr["data"].(map[string]any); data["code"] != "MCP_TOOL_RATE_LIMITED" {
		t.Errorf("a task past the rate limit: %v", rpcErr)
	}
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A task's status notifications reach the session that owns the task,
// and no other, even from a server that sends them to all its sessions.
func TestTaskStatusReachesOnlyTheOwner(t *testing.T) {
	t.Parallel()
	up := mcptaskstest.NewServer(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.URL})
	owner, _ := openTasks(t, e, alice)
	other, _ := openTasks(t, e, bob)
	for range 2 {
		within(t, up.Opened, "the upstream sessions' streams")
	}
	mine := createTask(t, e, alice, owner)
	theirs := createTask(t, e, bob, other)
	ownerEvents, otherEvents := openStream(t, e, alice, owner), openStream(t, e, bob, other)
	up.Status(mine, "working")
	up.Status(theirs, "working")
	for _, tt := range []struct {
		name   string
		events <-chan map[string]any
		want   string
	}{
		{"the owner gets its task's status first", ownerEvents, mine},
		{"another session never gets the owner's task's status", otherEvents, theirs},
	} {
		msg := within(t, tt.events, tt.name)
		params, _ := msg["params"].(map[string]any)
		if msg["method"] != "notifications/tasks/status" || params["taskId"] != tt.want || params["statusMessage"] != "still at it" {
			t.Errorf("%s: got %v", tt.name, msg)
		}
	}
}

// openStream opens the own event stream of session sid as w and returns
// the messages it carries.
func openStream(t testing.TB, e *env, w who, sid string) <-chan map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/mcp/mcp1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := (&http.Client{Transport: identityTransport{w}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					out <- m
				}
			}
		}
	}()
	return out
}

// A task-augmented call's progress reaches the session that made the
// call, on its own stream, under the agent's token: what the server sends
// before the task is created, and what it sends after, while the task
// runs. No other session gets it, even from a server that sends it to
// all its sessions, and each attempt is a decision that says so.
func TestTaskProgressReachesOnlyTheCaller(t *testing.T) {
	t.Parallel()
	for _, paths := range []struct{ sdkAgent, sdkUpstream bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("SDK agent side %v, SDK upstream side %v", paths.sdkAgent, paths.sdkUpstream), func(t *testing.T) {
			taskProgress(t, paths.sdkAgent, paths.sdkUpstream)
		})
	}
}

func taskProgress(t *testing.T, sdkAgent, sdkUpstream bool) {
	up := mcptaskstest.NewServer(t)
	// A decision is recorded just after the message it decided was
	// written, so the test waits for them rather than reading them.
	decided := make(chan string, 16)
	e := newEnv(t, mcpproxy.Config{OnDecision: func(_ context.Context, ev mcpevent.Decision) {
		if ev.Method == "notifications/progress" {
			decided <- ev.Caller.Namespace + " " + ev.Outcome
		}
	}}, mcpproxy.Connection{BaseURL: up.URL, Redact: []string{"sk-upstream-secret"}})
	mcpproxy.UseSDKPaths(e.proxy, sdkAgent, sdkUpstream)
	owner, _ := openTasks(t, e, alice)
	sibling, _ := openTasks(t, e, alice)
	other, _ := openTasks(t, e, bob)
	for range 3 {
		within(t, up.Opened, "the upstream sessions' streams")
	}
	ownerEvents := openStream(t, e, alice, owner)
	res, rpcErr := rpc(t, e, alice, owner, "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"n": 1}, "task": map[string]any{"ttl": 1000}, "_meta": map[string]any{"progressToken": 7}})
	if task, _ := res["task"].(map[string]any); task["taskId"] == nil {
		t.Fatalf("a task-augmented call with a progress token answered %v, %v", res, rpcErr)
	}
	if got := jsonOf(t, within(t, ownerEvents, "the progress sent before the task")); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"starting with [redacted]","progress":1,"progressToken":7}}` {
		t.Errorf("the progress before the task: %s", got)
	}
	passed := string(up.Tokens()[0])
	if passed == "7" || !strings.HasPrefix(passed, `"idn-`) {
		t.Error("the agent's own progress token went upstream")
	}
	siblingEvents, otherEvents := openStream(t, e, alice, sibling), openStream(t, e, bob, other)
	siblingTask, otherTask := createTask(t, e, alice, sibling), createTask(t, e, bob, other)
	up.Progress(0, 2)
	// What each other session is sent next is the status of its own task.
	up.Status(siblingTask, "working")
	up.Status(otherTask, "working")
	if got := jsonOf(t, within(t, ownerEvents, "the progress sent after the task")); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2,"progressToken":7,"total":3}}` {
		t.Errorf("the progress after the task: %s", got)
	}
	for _, tt := range []struct {
		name   string
		events <-chan map[string]any
		want   string
	}{
		{"the same caller's other session listens for the owner's task progress", siblingEvents, siblingTask},
		{"another caller listens for the owner's task progress", otherEvents, otherTask},
	} {
		msg := within(t, tt.events, tt.name)
		if params, _ := msg["params"].(map[string]any); msg["method"] != "notifications/tasks/status" || params["taskId"] != tt.want {
			t.Errorf("%s: got %v", tt.name, msg)
		}
	}
	probes := map[string]int{}
	for range 4 {
		probes[within(t, decided, "the progress decisions")]++
	}
	select {
	case extra := <-decided:
		probes[extra]++
	default:
	}
	if want := map[string]int{"alice relayed": 2, "alice not_owned": 1, "bob not_owned": 1}; !maps.Equal(probes, want) {
		t.Errorf("progress decisions %v, want %v", probes, want)
	}
}
