package main

import (
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/internal/mcptasks"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/mcpconversation"
)

// initializeClientTasks declares the client side of tasks, with sampling
// and elicitation, as a desktop client of 2025-11-25 does.
const initializeClientTasks = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"raw","version":"1"},` +
	`"capabilities":{"sampling":{},"elicitation":{},"tasks":{"list":{},"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}}}}`

// taskRunner is a stdio client of idn mcp, JSON lines, that runs the
// server's task-augmented sampling and elicitation as tasks of its own,
// and answers the server's requests about them.
type taskRunner struct {
	t        *testing.T
	name     string
	mu       sync.Mutex
	in       io.Writer
	n        int
	kinds    map[string]string // task id → the method that created it
	requests []string          // the server's requests, method and params without _meta
	answers  chan map[string]json.RawMessage
	told     chan map[string]json.RawMessage // cancellations, and the requests it holds
}

// runTasks runs idn mcp against st and initializes it with initialize.
func (st *mcpStack) runTasks(t *testing.T, name, initialize string) *taskRunner {
	t.Helper()
	in, out, stderr := st.start(t)
	r := &taskRunner{t: t, name: name, in: in, kinds: map[string]string{}, answers: make(chan map[string]json.RawMessage, 16), told: make(chan map[string]json.RawMessage, 16)}
	go func() {
		defer close(r.answers)
		dec := json.NewDecoder(out)
		for {
			var m map[string]json.RawMessage
			if dec.Decode(&m) != nil {
				return
			}
			var method string
			_ = json.Unmarshal(m["method"], &method)
			switch {
			case method == "ping":
				r.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{}})
			case method != "" && m["id"] != nil:
				var params map[string]any
				_ = json.Unmarshal(m["params"], &params)
				kept := maps.Clone(params)
				delete(kept, "_meta")
				raw, _ := json.Marshal(kept)
				r.mu.Lock()
				r.requests = append(r.requests, method+" "+string(raw))
				r.mu.Unlock()
				if params["message"] == "hold" {
					r.told <- m // answered by no one
					continue
				}
				r.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": r.answer(method, params)})
			case method == "notifications/cancelled":
				r.told <- m
			case m["id"] != nil:
				r.answers <- m
			}
		}
	}()
	r.write(initialize)
	if m := r.next(t, "the answer to initialize (stderr "+stderr.String()+")"); string(m["id"]) != "1" {
		t.Fatalf("initialize answered %s", m)
	}
	r.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *taskRunner) write(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = io.WriteString(r.in, line+"\n")
}

func (r *taskRunner) send(msg any) {
	raw, _ := json.Marshal(msg)
	r.write(string(raw))
}

func (r *taskRunner) next(t *testing.T, what string) map[string]json.RawMessage {
	t.Helper()
	select {
	case m, ok := <-r.answers:
		if !ok {
			t.Fatalf("%s: idn mcp's stdout ended", what)
		}
		return m
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: none within 20 s", what)
	}
	return nil
}

// nextTold is the next cancellation idn mcp writes, or request the client
// holds.
func (r *taskRunner) nextTold(t *testing.T, what string) map[string]json.RawMessage {
	t.Helper()
	select {
	case m := <-r.told:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: none within 10 s", what)
	}
	return nil
}

func (r *taskRunner) task(id, status string) map[string]any {
	return map[string]any{"taskId": id, "status": status, "createdAt": "2026-01-02T03:04:05Z", "lastUpdatedAt": "2026-01-02T03:04:05Z", "ttl": 60000}
}

// answer is the client's answer to the server's request of method; once
// polled, it tells the server its task ended.
func (r *taskRunner) answer(method string, params map[string]any) any {
	id, _ := params["taskId"].(string)
	switch method {
	case "sampling/createMessage", "elicitation/create":
		if params["task"] == nil {
			return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "asked without a task"}, "model": "m"}
		}
		r.mu.Lock()
		r.n++
		id = fmt.Sprintf("%s-task-%d", r.name, r.n)
		r.kinds[id] = method
		r.mu.Unlock()
		return map[string]any{"task": r.task(id, "working")}
	case "tasks/get":
		r.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": r.task(id, "completed")})
		return r.task(id, "completed")
	case "tasks/result":
		r.mu.Lock()
		kind := r.kinds[id]
		r.mu.Unlock()
		if kind == "elicitation/create" {
			return map[string]any{"action": "accept", "content": map[string]any{"name": r.name}}
		}
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sampled by " + r.name}, "model": "m"}
	case "tasks/cancel":
		return r.task(id, "cancelled")
	case "tasks/list":
		return map[string]any{"tasks": []any{r.task(r.name+"-task-1", "completed"), r.task("unseen-task", "completed")}}
	}
	return map[string]any{}
}

// call calls tool through idn mcp and returns the text of its result.
func (r *taskRunner) call(t *testing.T, id int, tool string, args map[string]any) string {
	t.Helper()
	r.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	m := r.next(t, "the answer to "+tool)
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(m["result"], &res) != nil || len(res.Content) == 0 {
		t.Fatalf("%s answered %s", tool, m)
	}
	var texts []string
	for _, c := range res.Content {
		texts = append(texts, c.Text)
	}
	return strings.Join(texts, "\n")
}

// The reference server's tools that run a sampling and an elicitation on
// the client as tasks work through idn mcp and the gateway: the server
// sees the stdio client's tasks capability (it lists those tools only to
// clients that declare it), asks for each as a task, and the stdio client
// is asked with the task, then polled for it and asked for its result.
func TestEverythingClientTasksThroughIdnMCP(t *testing.T) {
	upstream := mcpconversation.StartEverything(t)
	st := newMCPStackFor(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upstream,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"})
	r := st.runTasks(t, "desk", initializeClientTasks)
	for i, tt := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"trigger-sampling-request-async", map[string]any{"prompt": "hello", "maxTokens": 10}, []string{"[COMPLETED]", "Task created: desk-task-1", "Poll 1: completed", "sampled by desk"}},
		{"trigger-elicitation-request-async", map[string]any{}, []string{"Task created: desk-task-2", "Poll 1: completed", `"action": "accept"`, `"name": "desk"`}},
	} {
		if got := r.call(t, 2+i, tt.tool, tt.args); !containsAll(got, tt.want...) {
			t.Errorf("%s answered %s", tt.tool, got)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var methods []string
	for _, req := range r.requests {
		method, params, _ := strings.Cut(req, " ")
		methods = append(methods, method)
		if (method == "sampling/createMessage" || method == "elicitation/create") && !strings.Contains(params, `"task":{`) {
			t.Errorf("the stdio client was asked without a task: %s", req)
		}
	}
	if got, want := strings.Join(methods, " "), "sampling/createMessage tasks/get tasks/result elicitation/create tasks/get tasks/result"; got != want {
		t.Errorf("the stdio client was asked %q, want %q", got, want)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// fakeGateway plays the gateway to idn mcp as raw JSON-RPC: it opens
// sessions, lists no tools, sends on a session's own stream what the
// test gives it, and hands the test the bridge's answers and
// notifications.
type fakeGateway struct {
	url      string
	mu       sync.Mutex
	n        int
	declared map[string]string // session id → the tasks capability its initialize declared
	streams  map[string]chan string
	lost     map[string]bool                 // sessions answered 404 from now
	opened   chan string                     // the id of each session whose stream opened
	answers  chan map[string]json.RawMessage // the bridge's answers to what the fake sent
	statuses chan string                     // the task ids of the status notifications posted
}

func newFakeGateway(t *testing.T) *fakeGateway {
	f := &fakeGateway{declared: map[string]string{}, streams: map[string]chan string{}, lost: map[string]bool{}, opened: make(chan string, 8),
		answers: make(chan map[string]json.RawMessage, 16), statuses: make(chan string, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		f.mu.Lock()
		lost := f.lost[sid]
		f.mu.Unlock()
		if lost {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet:
			f.mu.Lock()
			events := f.streams[sid]
			f.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: 0\nevent: prime\ndata: \n\n")
			w.(http.Flusher).Flush()
			f.opened <- sid
			for {
				select {
				case msg := <-events:
					_, _ = io.WriteString(w, "data: "+msg+"\n\n")
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		case http.MethodDelete:
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				TaskID       string `json:"taskId"`
				Capabilities struct {
					Tasks json.RawMessage `json:"tasks"`
				} `json:"capabilities"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &msg)
		var result string
		switch {
		case msg.Method == "initialize":
			f.mu.Lock()
			f.n++
			sid = fmt.Sprint("session-", f.n)
			f.declared[sid] = string(msg.Params.Capabilities.Tasks)
			f.streams[sid] = make(chan string, 8)
			f.mu.Unlock()
			w.Header().Set("Mcp-Session-Id", sid)
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`
		case msg.Method == "tools/list":
			result = `{"tools":[]}`
		case msg.Method == "notifications/tasks/status":
			f.statuses <- msg.Params.TaskID
			fallthrough
		case msg.ID == nil:
			w.WriteHeader(http.StatusAccepted)
			return
		case msg.Method == "":
			var m map[string]json.RawMessage
			_ = json.Unmarshal(body, &m)
			f.answers <- m
			w.WriteHeader(http.StatusAccepted)
			return
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// ask sends msg on the own stream of session sid and returns the bridge's
// answer.
func (f *fakeGateway) ask(t *testing.T, sid, msg string) string {
	t.Helper()
	f.mu.Lock()
	events := f.streams[sid]
	f.mu.Unlock()
	events <- msg
	select {
	case m := <-f.answers:
		delete(m, "jsonrpc")
		raw, _ := json.Marshal(m)
		return string(raw)
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to %s", msg)
	}
	return ""
}

// declaring returns the id of the next session whose stream opened and
// whose initialize declared tasks.
func (f *fakeGateway) declaring(t *testing.T) string {
	t.Helper()
	for {
		select {
		case opened := <-f.opened:
			f.mu.Lock()
			declared := f.declared[opened]
			f.mu.Unlock()
			if declared != "" {
				return opened
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no stream of a session that declared tasks opened")
		}
	}
}

// status is the task id of the next status notification posted.
func (f *fakeGateway) status(t *testing.T) string {
	t.Helper()
	select {
	case id := <-f.statuses:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no status notification within 10 s")
	}
	return ""
}

// idn mcp relays the client side of tasks only for the tasks its stdio
// client created through it: whatever the gateway asks about any other
// task id is answered "task not found" by idn mcp itself, and the stdio
// client is never asked; a tasks/list page keeps only its tasks; and only
// the status of its own tasks goes to the gateway.
func TestMCPBridgeRelaysOnlyItsClientsTasks(t *testing.T) {
	f := newFakeGateway(t)
	st := &mcpStack{url: f.url, home: t.TempDir()}
	agent, err := identity.New("desk-agent")
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Save(st.home); err != nil {
		t.Fatal(err)
	}
	r := st.runTasks(t, "desk", initializeClientTasks)
	sid := f.declaring(t)
	f.mu.Lock()
	declared := f.declared[sid]
	f.mu.Unlock()
	if want := `{"list":{},"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}`; declared != want {
		t.Errorf("the gateway session declared tasks %s, want %s", declared, want)
	}
	created := f.ask(t, sid, `{"jsonrpc":"2.0","id":"g1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,"task":{"ttl":60000}}}`)
	if !strings.Contains(created, `"taskId":"desk-task-1"`) {
		t.Fatalf("the task-augmented sampling was answered %s", created)
	}
	notFound := `{"error":{"code":-32602,"message":"Failed to retrieve task: Task not found"},"id":"g2"}`
	for _, tt := range []struct {
		name, request, want string
		asked               bool
	}{
		{"the task the stdio client created through idn mcp", `{"jsonrpc":"2.0","id":"g2","method":"tasks/get","params":{"taskId":"desk-task-1"}}`,
			`{"id":"g2","result":{"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","status":"completed","taskId":"desk-task-1","ttl":60000}}`, true},
		{"tasks/get of a task the stdio client did not create through idn mcp", `{"jsonrpc":"2.0","id":"g2","method":"tasks/get","params":{"taskId":"unseen-task"}}`, notFound, false},
		{"tasks/result of a task the stdio client did not create through idn mcp", `{"jsonrpc":"2.0","id":"g2","method":"tasks/result","params":{"taskId":"unseen-task"}}`, notFound, false},
		{"tasks/cancel of a task the stdio client did not create through idn mcp", `{"jsonrpc":"2.0","id":"g2","method":"tasks/cancel","params":{"taskId":"unseen-task"}}`, notFound, false},
		{"tasks/get without a task id", `{"jsonrpc":"2.0","id":"g2","method":"tasks/get","params":{}}`, notFound, false},
		{"tasks/list keeps only the tasks created through idn mcp", `{"jsonrpc":"2.0","id":"g2","method":"tasks/list","params":{}}`,
			`{"id":"g2","result":{"tasks":[{"createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","status":"completed","taskId":"desk-task-1","ttl":60000}]}}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.mu.Lock()
			before := len(r.requests)
			r.mu.Unlock()
			if got := f.ask(t, sid, tt.request); got != tt.want {
				t.Errorf("answered %s, want %s", got, tt.want)
			}
			r.mu.Lock()
			asked := r.requests[before:]
			r.mu.Unlock()
			if tt.asked != (len(asked) == 1) {
				t.Errorf("the stdio client was asked %q", asked)
			}
		})
	}
	// The stdio client told the gateway its task completed when polled.
	if id := f.status(t); id != "desk-task-1" {
		t.Errorf("the gateway was told the status of %q", id)
	}
	t.Run("the status of a task the stdio client did not create through idn mcp", func(t *testing.T) {
		r.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": r.task("unseen-task", "completed")})
		r.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": r.task("desk-task-1", "completed")})
		if id := f.status(t); id != "desk-task-1" {
			t.Errorf("the gateway was told the status of %q", id)
		}
	})
	t.Run("the gateway cancels its request", func(t *testing.T) {
		f.mu.Lock()
		events := f.streams[sid]
		f.mu.Unlock()
		events <- `{"jsonrpc":"2.0","id":"g5","method":"elicitation/create","params":{"message":"hold","requestedSchema":{"type":"object"},"task":{"ttl":60000}}}`
		asked := r.nextTold(t, "the held elicitation")
		events <- `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"g5"}}`
		cancelled := r.nextTold(t, "the cancellation")
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if string(cancelled["method"]) != `"notifications/cancelled"` || json.Unmarshal(cancelled["params"], &p) != nil || string(p.RequestID) != string(asked["id"]) {
			t.Errorf("asked %s, then told %s", asked, cancelled)
		}
	})
	t.Run("a later gateway session names the task", func(t *testing.T) {
		f.mu.Lock()
		f.lost[sid] = true
		f.mu.Unlock()
		// The bridge finds its session lost and opens another.
		r.write(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
		later := f.declaring(t)
		if m := r.next(t, "the answer to tools/list"); string(m["id"]) != "9" || m["error"] != nil {
			t.Fatalf("tools/list answered %s", m)
		}
		r.mu.Lock()
		before := len(r.requests)
		r.mu.Unlock()
		if got := f.ask(t, later, `{"jsonrpc":"2.0","id":"g2","method":"tasks/get","params":{"taskId":"desk-task-1"}}`); got != notFound {
			t.Errorf("answered %s, want %s", got, notFound)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if asked := r.requests[before:]; len(asked) != 0 {
			t.Errorf("the stdio client was asked %q", asked)
		}
	})
}

// The SDK's client opens a session's own stream again after it broke: the
// bridge takes each opening, and forgets the stream once it ended, so a
// long-running bridge keeps nothing of the streams of ended sessions.
func TestClientTasksStreamOpenedAgain(t *testing.T) {
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"hi\"}}\n\n")
	}))
	defer gateway.Close()
	c := &clientTasks{}
	c.caps.Store(&mcptasks.ClientCaps{})
	rt := c.transport(http.DefaultTransport)
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, gateway.URL, nil)
		req.Header.Set("Mcp-Session-Id", "s1")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) != 0 {
		t.Errorf("the bridge still keeps %d ended streams", len(c.streams))
	}
}
