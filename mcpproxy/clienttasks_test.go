package mcpproxy_test

//lint:file-ignore SA1019 the tests drive sampling, which the SDK deprecates for the newest protocol version only.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/internal/mcpconversation"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientTaskServer is an MCP server (2025-11-25) that, during a call of
// its tool "ask", asks the client for a sampling as a task, then polls the
// client's task (tasks/get), fetches its result (tasks/result) and lists
// the client's tasks; its tool "probe" asks the client about a task id it
// is given. It keeps one view of all its sessions, as a careless server
// may: the gateway must keep each agent's tasks to that agent.
type clientTaskServer struct {
	srv *httptest.Server

	mu       sync.Mutex
	seq      int
	declared []string                    // the tasks capability of each initialize
	waiting  map[string]chan wireMessage // the server's requests, by id
	lost     map[string]bool             // session ids answered 404
	sessions []string
	statuses chan string            // the taskId of each status notification received
	streams  map[string]chan []byte // each session's own event stream, by id
	opened   chan struct{}          // one value per stream opened
}

type wireMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func newClientTaskServer(t testing.TB) *clientTaskServer {
	ts := &clientTaskServer{waiting: map[string]chan wireMessage{}, lost: map[string]bool{}, statuses: make(chan string, 16),
		streams: map[string]chan []byte{}, opened: make(chan struct{}, 16)}
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(ts.srv.Close)
	return ts
}

// loseSessions forgets every session opened so far: their next request
// is answered 404, and the gateway opens another.
func (ts *clientTaskServer) loseSessions() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, s := range ts.sessions {
		ts.lost[s] = true
	}
}

func (ts *clientTaskServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		ts.stream(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg wireMessage
	if json.NewDecoder(r.Body).Decode(&msg) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ts.mu.Lock()
	lost := ts.lost[r.Header.Get("Mcp-Session-Id")]
	ts.mu.Unlock()
	switch {
	case lost:
		w.WriteHeader(http.StatusNotFound)
		return
	case msg.Method == "": // the client's answer to a request of ours
		ts.mu.Lock()
		answer := ts.waiting[string(msg.ID)]
		ts.mu.Unlock()
		if answer != nil {
			answer <- msg
		}
		w.WriteHeader(http.StatusAccepted)
		return
	case msg.ID == nil:
		if msg.Method == "notifications/tasks/status" {
			var p struct {
				TaskID string `json:"taskId"`
			}
			_ = json.Unmarshal(msg.Params, &p)
			ts.statuses <- p.TaskID
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch msg.Method {
	case "initialize":
		var p struct {
			Capabilities struct {
				Tasks json.RawMessage `json:"tasks"`
			} `json:"capabilities"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		ts.mu.Lock()
		ts.declared = append(ts.declared, string(p.Capabilities.Tasks))
		sid := fmt.Sprintf("cs%d", len(ts.declared))
		ts.sessions = append(ts.sessions, sid)
		ts.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		result = map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "asks", "version": "1"}, "capabilities": map[string]any{"tools": map[string]any{}}}
	case "tools/list":
		schema := map[string]any{"type": "object", "properties": map[string]any{"taskId": map[string]any{"type": "string"}}}
		result = map[string]any{"tools": []any{map[string]any{"name": "ask", "inputSchema": schema}, map[string]any{"name": "ask-aside", "inputSchema": schema},
			map[string]any{"name": "probe", "inputSchema": schema}}}
	case "tools/call":
		ts.call(w, r, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
}

// stream serves a session's own event stream.
func (ts *clientTaskServer) stream(w http.ResponseWriter, r *http.Request) {
	events := make(chan []byte, 16)
	ts.mu.Lock()
	ts.streams[r.Header.Get("Mcp-Session-Id")] = events
	ts.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	ts.opened <- struct{}{}
	for {
		select {
		case msg := <-events:
			fmt.Fprintf(w, "data: %s\n\n", msg)
			_ = http.NewResponseController(w).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

// call runs a tools/call on an event stream, asking the client what the
// tool asks and answering with the client's answers as its text; its
// tool "ask-aside" asks on the session's own stream instead.
func (ts *clientTaskServer) call(w http.ResponseWriter, r *http.Request, msg wireMessage) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			TaskID string `json:"taskId"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v any) {
		raw, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", raw)
		_ = http.NewResponseController(w).Flush()
	}
	request := send
	if p.Name == "ask-aside" {
		ts.mu.Lock()
		events := ts.streams[r.Header.Get("Mcp-Session-Id")]
		ts.mu.Unlock()
		request = func(v any) {
			raw, _ := json.Marshal(v)
			events <- raw
		}
	}
	var answers []wireMessage
	ask := func(method string, params any) wireMessage {
		ts.mu.Lock()
		ts.seq++
		id := strconv.Quote(fmt.Sprintf("srv-%d", ts.seq))
		answer := make(chan wireMessage, 1)
		ts.waiting[id] = answer
		ts.mu.Unlock()
		request(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
		var got wireMessage
		select {
		case got = <-answer:
		case <-r.Context().Done():
		}
		got.ID = nil
		answers = append(answers, got)
		return got
	}
	switch p.Name {
	case "ask", "ask-aside":
		created := ask("sampling/createMessage", map[string]any{"task": map[string]any{"ttl": 60000}, "maxTokens": 10,
			"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hello"}}}})
		var task struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		_ = json.Unmarshal(created.Result, &task)
		ask("tasks/get", map[string]any{"taskId": task.Task.TaskID})
		ask("tasks/result", map[string]any{"taskId": task.Task.TaskID})
		ask("tasks/list", map[string]any{})
	case "probe":
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			ask(method, map[string]any{"taskId": p.Arguments.TaskID})
		}
	}
	text, _ := json.Marshal(answers)
	send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}})
}

// taskAgent is an agent session that declares sampling and the client
// side of tasks, runs every sampling it is asked for as a task, and
// answers the server's requests about its tasks, on whichever stream they
// come.
type taskAgent struct {
	url  string
	hc   *http.Client
	name string // its tasks' ids start with it
	sid  string

	mu       sync.Mutex
	asked    []string // the methods it was asked, in order
	requests []string // and each request's params without _meta, as JSON
	n        int
	kinds    map[string]string // the method each of its tasks runs, by id
}

const initializeClientTasks = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"x","version":"1"},"capabilities":{"sampling":{},` +
	`"tasks":{"list":{},"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}}}}`

// initializeClientTasksAndElicitation declares elicitation too.
var initializeClientTasksAndElicitation = strings.Replace(initializeClientTasks, `"sampling":{},`, `"sampling":{},"elicitation":{},`, 1)

func openTaskAgent(t *testing.T, e *env, w who) *taskAgent {
	t.Helper()
	return openTaskAgentWith(t, e, w, initializeClientTasks)
}

// openTaskAgentWith opens an agent session through the gateway as w.
func openTaskAgentWith(t *testing.T, e *env, w who, initialize string) *taskAgent {
	t.Helper()
	return openTaskAgentAt(t, e.srv.URL+"/mcp/mcp1", &http.Client{Transport: identityTransport{w}}, w.namespace, initialize)
}

// openTaskAgentAt opens an agent session with the MCP server at url,
// with its own event stream open.
func openTaskAgentAt(t *testing.T, url string, hc *http.Client, name, initialize string) *taskAgent {
	t.Helper()
	a := &taskAgent{url: url, hc: hc, name: name, kinds: map[string]string{}}
	r := a.exchange(t, http.MethodPost, initialize)
	if a.sid = r.header.Get("Mcp-Session-Id"); r.status != http.StatusOK || a.sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.raw)
	}
	if n := a.exchange(t, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", n.status, n.raw)
	}
	resp, err := a.hc.Do(a.request(http.MethodGet, ""))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	go a.read(resp.Body, nil)
	return a
}

func (a *taskAgent) request(method, body string) *http.Request {
	req, _ := http.NewRequest(method, a.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if a.sid != "" {
		req.Header.Set("Mcp-Session-Id", a.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return req
}

// exchange sends body and reads the whole answer.
func (a *taskAgent) exchange(t *testing.T, method, body string) response {
	t.Helper()
	resp, err := a.hc.Do(a.request(method, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
}

// read answers the server's requests in the event stream body, and hands
// any other message to other.
func (a *taskAgent) read(body io.Reader, other func(raw string)) {
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var msg map[string]any
		if json.Unmarshal([]byte(data), &msg) != nil {
			continue
		}
		method, _ := msg["method"].(string)
		if msg["id"] == nil || method == "" {
			if other != nil {
				other(data)
			}
			continue
		}
		params, _ := msg["params"].(map[string]any)
		kept := maps.Clone(params)
		delete(kept, "_meta")
		raw, _ := json.Marshal(kept)
		a.mu.Lock()
		a.asked = append(a.asked, method)
		a.requests = append(a.requests, method+" "+string(raw))
		a.mu.Unlock()
		a.post(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": a.answer(method, params)})
	}
}

func (a *taskAgent) task(id, status string) map[string]any {
	return map[string]any{"taskId": id, "status": status, "createdAt": "2026-01-02T03:04:05Z", "lastUpdatedAt": "2026-01-02T03:04:05Z", "ttl": 60000}
}

// answer is the agent's answer to the server's request of method.
func (a *taskAgent) answer(method string, params map[string]any) any {
	id, _ := params["taskId"].(string)
	switch method {
	case "sampling/createMessage", "elicitation/create":
		if params["task"] == nil {
			return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "asked without a task"}, "model": "m"}
		}
		a.mu.Lock()
		a.n++
		id = fmt.Sprintf("%s-task-%d", a.name, a.n)
		a.kinds[id] = method
		a.mu.Unlock()
		return map[string]any{"task": a.task(id, "working")}
	case "tasks/get":
		// Its task ended: it tells the server so, as it tells it about
		// a task the gateway never saw it create.
		a.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": a.task("unseen-task", "completed")})
		a.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": a.task(id, "completed")})
		return a.task(id, "completed")
	case "tasks/result":
		a.mu.Lock()
		kind := a.kinds[id]
		a.mu.Unlock()
		if kind == "elicitation/create" {
			return map[string]any{"action": "accept", "content": map[string]any{"name": a.name}}
		}
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sampled by " + a.name}, "model": "m"}
	case "tasks/cancel":
		return a.task(id, "cancelled")
	case "tasks/list":
		return map[string]any{"tasks": []any{a.task(a.name+"-task-1", "completed"), a.task("unseen-task", "completed")}}
	}
	return map[string]any{}
}

// post sends msg on the agent's session.
func (a *taskAgent) post(msg any) {
	raw, _ := json.Marshal(msg)
	if resp, err := a.hc.Do(a.request(http.MethodPost, string(raw))); err == nil {
		resp.Body.Close()
	}
}

func (a *taskAgent) methods() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.asked, " ")
}

// call calls tool and returns the answers the server got, as the tool's
// text says.
func (a *taskAgent) call(t *testing.T, tool string, args map[string]any) []wireMessage {
	t.Helper()
	text := a.callText(t, tool, args)
	var answers []wireMessage
	if err := json.Unmarshal([]byte(text), &answers); err != nil {
		t.Fatalf("tools/call %s: %s", tool, text)
	}
	return answers
}

// callText calls tool and returns the texts of its result's blocks,
// joined, answering what the server asks on the call's stream meanwhile.
func (a *taskAgent) callText(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	resp, err := a.hc.Do(a.request(http.MethodPost, string(mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}))))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer string
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.read(resp.Body, func(raw string) { answer = raw })
	} else {
		raw, _ := io.ReadAll(resp.Body)
		answer = string(raw)
	}
	var res struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(answer), &res); err != nil || len(res.Result.Content) == 0 {
		t.Fatalf("tools/call %s: %s", tool, answer)
	}
	var texts []string
	for _, c := range res.Result.Content {
		texts = append(texts, c.Text)
	}
	return strings.Join(texts, "\n")
}

// The client side of tasks passes through the gateway: the agent's
// capability is declared upstream, the server's task-augmented sampling
// reaches the agent whose call caused it with its task, and the server's
// requests about that task reach that agent alone and come back; the
// agent's status notifications of its task reach the server.
func TestClientTasksAreRelayed(t *testing.T) {
	t.Parallel()
	// "ask" asks on the call's stream, "ask-aside" on the upstream
	// session's own, which the SDK's client reads.
	for _, tool := range []string{"ask", "ask-aside"} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			relaysClientTasks(t, tool)
		})
	}
}

func relaysClientTasks(t *testing.T, tool string) {
	up := newClientTaskServer(t)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{Timeout: 15 * time.Second}}, mcpproxy.Connection{BaseURL: up.srv.URL})
	a := openTaskAgent(t, e, alice)
	within(t, up.opened, "the upstream session's stream")
	up.mu.Lock()
	declared := up.declared[0]
	up.mu.Unlock()
	// Elicitation as a task is not declared: the agent offers no elicitation.
	if declared != `{"list":{},"cancel":{},"requests":{"sampling":{"createMessage":{}}}}` {
		t.Errorf("the upstream session declared tasks %s", declared)
	}
	got := a.call(t, tool, map[string]any{})
	want := []string{
		`{"result":{"task":{"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","status":"working","taskId":"alice-task-1","ttl":60000}}}`,
		`{"result":{"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","status":"completed","taskId":"alice-task-1","ttl":60000}}`,
		`{"result":{"content":{"text":"sampled by alice","type":"text"},"model":"m","role":"assistant"}}`,
		// The agent's list, minus a task the gateway never saw it create.
		`{"result":{"tasks":[{"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","status":"completed","taskId":"alice-task-1","ttl":60000}]}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("the server got %d answers, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if s := string(mustJSON(t, got[i])); s != want[i] {
			t.Errorf("answer %d = %s, want %s", i, s, want[i])
		}
	}
	if m := a.methods(); m != "sampling/createMessage tasks/get tasks/result tasks/list" {
		t.Errorf("the agent was asked %q", m)
	}
	if id := within(t, up.statuses, "the agent's status notification"); id != "alice-task-1" {
		t.Errorf("the server was told the status of %q", id)
	}
	select {
	case id := <-up.statuses:
		t.Errorf("the server was told the status of %q too", id)
	default:
	}
	if n := e.metric("idn_gateway_mcp_task_total", "relayed"); n != 5 {
		t.Errorf("idn_gateway_mcp_task_total{result=relayed} = %v, want 5", n)
	}
	if n := e.metric("idn_gateway_mcp_task_total", "not_owned"); n != 1 {
		t.Errorf("idn_gateway_mcp_task_total{result=not_owned} = %v, want 1 (the unseen task's status)", n)
	}
}

// A server's requests about a client-side task reach only the agent
// session that created it, and only from the upstream session it was
// created for: any other is answered "task not found" by the gateway,
// and no agent is asked.
func TestClientTaskIDsBelongToTheirSessionPair(t *testing.T) {
	t.Parallel()
	up := newClientTaskServer(t)
	var mu sync.Mutex
	var probes []string
	e := newEnv(t, mcpproxy.Config{OnDecision: func(_ context.Context, ev mcpevent.Decision) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Outcome == "not_owned" && ev.Method != "notifications/tasks/status" {
			probes = append(probes, ev.Caller.Namespace+" "+ev.Method)
		}
	}, Options: mcpproxy.Options{Timeout: 15 * time.Second}}, mcpproxy.Connection{BaseURL: up.srv.URL})
	owner := openTaskAgent(t, e, alice)
	owner.call(t, "ask", map[string]any{})
	within(t, up.statuses, "the owner's status notification")
	notFound := `{"error":{"code":-32602,"message":"Failed to retrieve task: Task not found"}}`
	for _, tt := range []struct {
		name  string
		agent func() *taskAgent
		lose  bool // the server forgets its sessions first
		want  string
	}{
		{"the session that created it", func() *taskAgent { return owner }, false, ""},
		{"another caller's session names the task", func() *taskAgent { return openTaskAgent(t, e, bob) }, false, notFound},
		{"the same caller's other session names the task", func() *taskAgent { return openTaskAgent(t, e, alice) }, false, notFound},
		{"a later upstream session of the session that created it names the task", func() *taskAgent { return owner }, true, notFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.agent()
			if tt.lose {
				up.loseSessions()
			}
			before := a.methods()
			for _, answer := range a.call(t, "probe", map[string]any{"taskId": "alice-task-1"}) {
				got := string(mustJSON(t, answer))
				if tt.want == "" && strings.Contains(got, `"error"`) || tt.want != "" && got != tt.want {
					t.Errorf("the server was answered %s", got)
				}
			}
			if asked := a.methods(); tt.want != "" && asked != before {
				t.Errorf("the agent was asked %q about a task not its session's", strings.TrimPrefix(asked, before))
			}
		})
	}
	if m := owner.methods(); strings.Count(m, "tasks/get") != 2 {
		t.Errorf("the owner was asked %q", m)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(probes) != 9 {
		t.Errorf("probes decided as not_owned: %v", probes)
	}
}

// The reference server's tools that run a sampling and an elicitation on
// the client as tasks work through the gateway as they work directly: the
// server sees the agent's tasks capability (it lists the tools only to
// clients that declare it), asks for each as a task, polls the agent's
// task and fetches its result; the agent is asked the same, and the
// server answers the same.
func TestEverythingClientTasksDirectAndThroughTheGatewayAgree(t *testing.T) {
	upstream := mcpconversation.StartEverything(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: upstream})
	direct := openTaskAgentAt(t, upstream, http.DefaultClient, "alice", initializeClientTasksAndElicitation)
	gateway := openTaskAgentWith(t, e, alice, initializeClientTasksAndElicitation)
	for _, tt := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"trigger-sampling-request-async", map[string]any{"prompt": "hello", "maxTokens": 10}, []string{"[COMPLETED]", "Task created: alice-task-1", "Poll 1: completed", "sampled by alice"}},
		{"trigger-elicitation-request-async", map[string]any{}, []string{"Task created: alice-task-2", "Poll 1: completed", `"action": "accept"`, `"name": "alice"`}},
	} {
		got, want := gateway.callText(t, tt.tool, tt.args), direct.callText(t, tt.tool, tt.args)
		if !containsAll(want, tt.want...) {
			t.Errorf("%s answered directly %s", tt.tool, want)
		}
		if got != want {
			t.Errorf("%s answered through the gateway %s, directly %s", tt.tool, got, want)
		}
	}
	for _, a := range []*taskAgent{direct, gateway} {
		if got, want := a.methods(), "sampling/createMessage tasks/get tasks/result elicitation/create tasks/get tasks/result"; got != want {
			t.Errorf("the agent at %s was asked %q, want %q", a.url, got, want)
		}
	}
	direct.mu.Lock()
	gateway.mu.Lock()
	defer direct.mu.Unlock()
	defer gateway.mu.Unlock()
	if !slices.Equal(gateway.requests, direct.requests) {
		t.Errorf("through the gateway the agent was asked\n%s\ndirectly\n%s", strings.Join(gateway.requests, "\n"), strings.Join(direct.requests, "\n"))
	}
}

// declareTasks adds the client side of tasks to the go-sdk client's
// initialize, which has no field for it.
type declareTasks struct{ base http.RoundTripper }

func (d declareTasks) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return d.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	body = bytes.Replace(body, []byte(`"capabilities":{`), []byte(`"capabilities":{"tasks":{"requests":{"sampling":{"createMessage":{}}}},`), 1)
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return d.base.RoundTrip(r)
}

// An agent that declared the client side of tasks but keeps no event
// stream of its own open is asked for a task-augmented sampling as a
// plain one, on the call's stream (the server gets a plain result, which
// it must take); the server's requests about tasks find none of its, and
// the agent's tasks/list is not asked for: it declared none.
func TestClientTasksWithoutAStreamFallBackToPlainRequests(t *testing.T) {
	t.Parallel()
	up := newClientTaskServer(t)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{Timeout: 15 * time.Second}}, mcpproxy.Connection{BaseURL: up.srv.URL})
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "a plain answer"}}, nil
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             e.srv.URL + "/mcp/mcp1",
		HTTPClient:           &http.Client{Transport: declareTasks{identityTransport{alice}}},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}, session2025)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	up.mu.Lock()
	declared := up.declared[0]
	up.mu.Unlock()
	if declared != `{"requests":{"sampling":{"createMessage":{}}}}` {
		t.Errorf("the upstream session declared tasks %s", declared)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !containsAll(text, `{"result":{"content":{"type":"text","text":"a plain answer"},"model":"m","role":"assistant"}}`, `{"error":{"code":-32602,"message":"Failed to retrieve task: Task not found"}}`) {
		t.Errorf("the server got %s", text)
	}
}
