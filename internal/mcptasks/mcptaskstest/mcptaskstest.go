// Package mcptaskstest is for tests: Server is an MCP server (protocol
// version 2025-11-25) that offers tasks, for the tests of the gateway's
// MCP endpoint and of the idn mcp bridge, which relay them.
package mcptaskstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is an MCP server that offers task-augmented tools/call (of its
// tools work and secret.work), tasks/get, tasks/result, tasks/list and
// tasks/cancel, and keeps its tasks in one store for all its sessions, as
// a server without authorization may: any session can read any task it
// can name. What relays it must not let one session reach another's
// tasks through it.
//
// A task-augmented call with a progress token is answered as an event
// stream that carries a progress notification under that token ahead of
// the task (its message holds the secret sk-upstream-secret); Progress,
// Status and Notify send more to every session's own stream, as a server
// that does not tell its sessions apart might.
type Server struct {
	// URL is the server's endpoint.
	URL string
	// Opened receives one value for each session's own stream (GET)
	// opened.
	Opened <-chan struct{}

	opened  chan struct{}
	mu      sync.Mutex
	tasks   map[string]string // id → status
	methods []string          // the methods received, in order
	streams []chan string     // the sessions' own event streams
	tokens  []json.RawMessage // the progress tokens of task-augmented calls
}

// NewServer starts a Server, closed when t ends.
func NewServer(t testing.TB) *Server {
	s := &Server{tasks: map[string]string{}, opened: make(chan struct{}, 16)}
	s.Opened = s.opened
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Received is how many messages of method the server received.
func (s *Server) Received(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.methods {
		if m == method {
			n++
		}
	}
	return n
}

// Tokens are the progress tokens of the task-augmented calls that had
// one, as the server received them, in order.
func (s *Server) Tokens() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.tokens...)
}

// Progress sends every session's stream a progress notification under
// the progress token of the i-th task-augmented call that had one.
func (s *Server) Progress(i int, progress float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%v,"total":3}}`, s.tokens[i], progress))
}

// Status sets task id's status and sends every session's stream a status
// notification of it.
func (s *Server) Status(id, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[id] = status
	s.send(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"` + id + `","status":"` + status + `","statusMessage":"still at it","createdAt":"2026-01-02T03:04:05Z","lastUpdatedAt":"2026-01-02T03:04:05Z","ttl":60000}}`)
}

// Notify sends every session's stream a notification of method with
// params, JSON as it is sent.
func (s *Server) Notify(method, params string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.send(`{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`)
}

// send writes msg to every session's stream; s.mu is held.
func (s *Server) send(msg string) {
	for _, stream := range s.streams {
		stream <- msg
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.stream(w, r)
		return
	case http.MethodPost:
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var msg request
	if json.NewDecoder(r.Body).Decode(&msg) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods = append(s.methods, msg.Method)
	if msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", len(s.methods)))
	}
	result, rpcErr, early := s.answer(msg)
	answer := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	if rpcErr != nil {
		answer["error"] = rpcErr
	} else {
		answer["result"] = result
	}
	if early != "" {
		w.Header().Set("Content-Type", "text/event-stream")
		raw, _ := json.Marshal(answer)
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\n", early, raw)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// stream serves a session's own event stream until its client leaves.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	events := make(chan string, 16)
	s.mu.Lock()
	s.streams = append(s.streams, events)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	s.opened <- struct{}{}
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

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name   string          `json:"name"`
		Task   json.RawMessage `json:"task"`
		TaskID string          `json:"taskId"`
		Meta   struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

// answer is the result or the error of msg, and a notification sent
// ahead of it ("": none); s.mu is held.
func (s *Server) answer(msg request) (result, rpcErr any, early string) {
	task := func(id string) map[string]any {
		return map[string]any{"taskId": id, "status": s.tasks[id], "createdAt": "2026-01-02T03:04:05Z", "lastUpdatedAt": "2026-01-02T03:04:05Z", "ttl": 60000}
	}
	unknown := map[string]any{"code": -32602, "message": "no task " + msg.Params.TaskID}
	known := s.tasks[msg.Params.TaskID] != ""
	switch msg.Method {
	case "initialize":
		return map[string]any{
			"protocolVersion": "2025-11-25",
			"serverInfo":      map[string]any{"name": "tasks", "version": "1"},
			"capabilities": map[string]any{"tools": map[string]any{}, "tasks": map[string]any{
				"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
			}},
		}, nil, ""
	case "tools/list":
		schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
		return map[string]any{"tools": []any{
			map[string]any{"name": "work", "inputSchema": schema, "execution": map[string]any{"taskSupport": "optional"}},
			map[string]any{"name": "secret.work", "inputSchema": schema, "execution": map[string]any{"taskSupport": "required"}},
		}}, nil, ""
	case "tools/call":
		if msg.Params.Task == nil {
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": "done at once"}}}, nil, ""
		}
		id := fmt.Sprintf("task-%d", len(s.tasks)+1)
		s.tasks[id] = "working"
		if token := msg.Params.Meta.ProgressToken; token != nil {
			// Progress before the task is created, on the call's stream.
			s.tokens = append(s.tokens, token)
			early = fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1,"message":"starting with sk-upstream-secret","_meta":{"io.modelcontextprotocol/related-task":{"taskId":%q}}}}`, token, id)
		}
		return map[string]any{"task": task(id)}, nil, early
	case "tasks/get", "tasks/cancel":
		if !known {
			return nil, unknown, ""
		}
		if msg.Method == "tasks/cancel" {
			s.tasks[msg.Params.TaskID] = "cancelled"
		}
		return task(msg.Params.TaskID), nil, ""
	case "tasks/result":
		if !known {
			return nil, unknown, ""
		}
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "the result of " + msg.Params.TaskID}},
			"_meta": map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": msg.Params.TaskID}}}, nil, ""
	case "tasks/list":
		var all []any
		for id := range s.tasks {
			all = append(all, task(id))
		}
		return map[string]any{"tasks": all}, nil, ""
	}
	return nil, map[string]any{"code": -32601, "message": "no method " + msg.Method}, ""
}
