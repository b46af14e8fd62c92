package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks (MCP 2025-11-25): a task-augmented tools/call answers at once with
// a task, whose status and result the client asks for later (tasks/get,
// tasks/result), lists (tasks/list) or cancels (tasks/cancel). The go-sdk
// has no model of them: its client drops the server's tasks capability and
// a tool's execution, its server cannot write them, and it takes a call's
// task for an unknown member. So the relay carries them as JSON, on the
// session's upstream session, where the server advertised task-augmented
// tools/call and the exchange speaks its version:
//
//   - the server's initialize answer is read on its way to the SDK's
//     client (mcptasks.Tap), for its tasks capability;
//   - the agent's initialize answer advertises the parts relayed (list,
//     cancel, requests.tools.call) and tools/list is relayed as the server
//     wrote it (with each tool's execution), minus what policy removes;
//   - a task-augmented tools/call is answered by the endpoint itself
//     (direct.go), after the same checks as a plain call; the tasks
//     methods are custom methods of the session's SDK server;
//   - every task id belongs to the agent session whose call created it:
//     tasks/get, tasks/result and tasks/cancel of another id are answered
//     as the server answers an unknown one, and tasks/list lists only the
//     session's own.

// maxTasksPerSession bounds the task ids a session keeps: past it, the
// oldest is forgotten (and no longer reachable through the gateway).
const maxTasksPerSession = 1024

// taskNotFound is the answer to a task id the session does not own,
// worded as the reference servers word an unknown one.
var taskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// sessionTasks is what an agent session knows of tasks: what its upstream
// session offers and the ids of the tasks it created.
type sessionTasks struct {
	offer atomic.Pointer[mcptasks.Offer]

	mu    sync.Mutex
	owned map[string]struct{}
	order []string // owned, oldest first
	// early are status notifications about tasks not (yet) owned: a
	// server may report a task before the gateway has read the answer
	// that created it.
	early []earlyStatus
}

type earlyStatus struct {
	taskID string
	params json.RawMessage
}

// maxEarlyStatus bounds the status notifications a session holds for
// tasks it does not own yet; past it, the oldest is dropped.
const maxEarlyStatus = 32

// hold keeps a status notification about a task s does not own yet, and
// returns the one it drops to make room, if any; false when the task is
// owned after all.
func (t *sessionTasks) hold(id string, params json.RawMessage) (dropped *earlyStatus, held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.owned[id]; ok {
		return nil, false
	}
	if len(t.early) >= maxEarlyStatus {
		dropped = &t.early[0]
		t.early = t.early[1:]
	}
	t.early = append(t.early, earlyStatus{id, params})
	return dropped, true
}

func (t *sessionTasks) setOffer(o *mcptasks.Offer) { t.offer.Store(o) }

// offered is the upstream's tasks capability; nil when it offers none.
func (t *sessionTasks) offered() *mcptasks.Caps {
	if o := t.offer.Load(); o != nil {
		return o.Caps
	}
	return nil
}

// own makes task id the session's, and returns the status notifications
// about it that came before.
func (t *sessionTasks) own(id string) []json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.owned[id]; ok {
		return nil
	}
	if t.owned == nil {
		t.owned = map[string]struct{}{}
	}
	if len(t.order) >= maxTasksPerSession {
		delete(t.owned, t.order[0])
		t.order = t.order[1:]
	}
	t.owned[id] = struct{}{}
	t.order = append(t.order, id)
	var early []json.RawMessage
	kept := t.early[:0]
	for _, s := range t.early {
		if s.taskID == id {
			early = append(early, s.params)
		} else {
			kept = append(kept, s)
		}
	}
	t.early = kept
	return early
}

func (t *sessionTasks) owns(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.owned[id]
	return ok
}

// relaysTasks reports whether s relays tasks: its upstream session offers
// task-augmented tools/call, speaks a version that has them and that the
// exchange speaks, and the agent's session settled on such a version.
func (e *endpoint) relaysTasks(s *agentSession) bool {
	o := s.tasks.offer.Load()
	if o == nil || !o.Caps.Callable() || o.Version < mcptasks.Version || o.Version > upstreamProtocol {
		return false
	}
	v := s.version.Load()
	return v != nil && *v >= mcptasks.Version
}

// taskSpec is a call's task augmentation, as far as it is passed on.
type taskSpec struct {
	TTL *float64 `json:"ttl,omitempty"`
}

// taskCallParams are the params of a task-augmented tools/call upstream.
type taskCallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Task      taskSpec        `json:"task"`
}

// addTaskMethods registers the tasks methods on s's server.
func (e *endpoint) addTaskMethods(s *agentSession) {
	for _, method := range mcptasks.Methods {
		_ = mcp.AddReceivingCustomMethod(s.server, method, func(ctx context.Context, ss *mcp.ServerSession, p *mcptasks.Params) (*mcptasks.Result, error) {
			return e.taskMethod(ctx, s, ss, method, p)
		})
	}
}

// taskMethod relays one tasks method of s upstream: only for the tasks s
// owns, tasks/list filtered to them, the server's errors as it sent them.
func (e *endpoint) taskMethod(ctx context.Context, s *agentSession, ss *mcp.ServerSession, method string, p *mcptasks.Params) (*mcptasks.Result, error) {
	conn := s.conn.Load()
	res, err := e.relayTask(ctx, s, ss, conn, method, p)
	result := "success"
	switch {
	case err == taskNotFound:
		// Many of these are someone probing for task ids.
		result = "not_owned"
	case err != nil:
		result = "error"
	}
	e.p.metrics.tasks.WithLabelValues(method, result).Inc()
	e.p.decide(ctx, conn, s.caller, method, "", result, nil)
	return res, err
}

func (e *endpoint) relayTask(ctx context.Context, s *agentSession, ss *mcp.ServerSession, conn *Connection, method string, p *mcptasks.Params) (*mcptasks.Result, error) {
	if !e.relaysTasks(s) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpproxy: " + method + " is not offered on this connection"}
	}
	if p == nil {
		p = &mcptasks.Params{}
	}
	offer := s.tasks.offered()
	if method == "tasks/list" && offer.List == nil || method == "tasks/cancel" && offer.Cancel == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpproxy: " + method + " is not offered on this connection"}
	}
	// Only what the method needs is passed on: the task it names, or the
	// page of tasks/list.
	params := map[string]string{"taskId": p.TaskID}
	switch {
	case method == "tasks/list" && p.Cursor != "":
		params = map[string]string{"cursor": p.Cursor}
	case method == "tasks/list":
		params = map[string]string{}
	case !s.tasks.owns(p.TaskID):
		return nil, taskNotFound
	}
	if method != "tasks/result" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.p.timeout)
		defer cancel()
	}
	st, err := e.p.state(conn)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	var relay *callRelay
	if method == "tasks/result" {
		// What the server asks while the task waits for input comes on
		// this request's stream, and goes to the agent on its own.
		relay = e.relayFor(ctx, s, ss, nil)
	}
	var raw json.RawMessage
	var answered *jsonrpc.Error
	err = e.p.guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = e.p.exchange(ctx, st, cs, method, params, relay)
		if errors.As(err, &answered) && upstream.ServerAnswered(err) {
			return nil
		}
		answered = nil
		return err
	})
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	if answered != nil {
		return nil, &jsonrpc.Error{Code: answered.Code, Message: st.scrubber.Load().Replace(answered.Message)}
	}
	if method == "tasks/list" {
		if raw, err = ownTasks(raw, s.tasks.owns); err != nil {
			return nil, rpcError(ctx, &UpstreamError{ConnectionID: conn.ID, Message: "tasks/list: " + err.Error()})
		}
	}
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return nil, rpcError(ctx, &UpstreamError{ConnectionID: conn.ID, Message: "an answer that cannot be checked for secrets"})
	}
	return &mcptasks.Result{Raw: *clean}, nil
}

// exchange sends one request of method on cs's session, through
// upstream.Request, and returns its result as the server wrote it; relay,
// when set, receives what the server sends meanwhile.
func (p *Proxy) exchange(ctx context.Context, st *connState, cs *mcp.ClientSession, method string, params any, relay *callRelay) (json.RawMessage, error) {
	id := "idn-" + strconv.FormatUint(p.callSeq.Add(1), 10)
	s := upstream.Session{Client: st.httpClient, Endpoint: st.currentEndpoint, ID: cs.ID(), Protocol: cs.InitializeResult().ProtocolVersion}
	return upstream.Request(ctx, s, id, method, params, callHandler{st, relay}, p.detach)
}

// ownTasks returns a tasks/list page with only the tasks owns says are
// the session's.
func ownTasks(raw json.RawMessage, owns func(string) bool) (json.RawMessage, error) {
	var page map[string]json.RawMessage
	var tasks []json.RawMessage
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(page["tasks"], &tasks); err != nil && page["tasks"] != nil {
		return nil, err
	}
	kept := make([]json.RawMessage, 0, len(tasks))
	for _, t := range tasks {
		var task struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(t, &task) == nil && owns(task.TaskID) {
			kept = append(kept, t)
		}
	}
	var err error
	if page["tasks"], err = json.Marshal(kept); err != nil {
		return nil, err
	}
	return json.Marshal(page)
}

// callAsTask sends a checked task-augmented tools/call upstream. The
// server answers with the task it created, which becomes the session's,
// or, when it ran the call as a plain one, with the call's result.
func (p *Proxy) callAsTask(ctx context.Context, st *connState, conn *Connection, tool string, args json.RawMessage, sc *sessionCall) (*CallResult, *mcp.CallToolResult, error) {
	params := taskCallParams{Name: tool, Arguments: args, Task: *sc.task}
	var raw json.RawMessage
	err := p.guarded(ctx, st, sc.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = p.exchange(ctx, st, cs, "tools/call", params, sc.relay)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var created struct {
		Task *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if json.Unmarshal(raw, &created) != nil || created.Task == nil || created.Task.TaskID == "" {
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, nil, &UpstreamError{ConnectionID: conn.ID, Message: "tools/call: unreadable result"}
		}
		return nil, &res, nil
	}
	sc.own(created.Task.TaskID)
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return nil, nil, &UpstreamError{ConnectionID: conn.ID, Message: "tool " + tool + " returned a task that cannot be checked for secrets"}
	}
	return &CallResult{ConnectionID: conn.ID, Tool: tool, task: *clean}, nil, nil
}

// rawTools is toolsPage for a session that relays tasks: the page as the
// server wrote it (with each tool's execution), minus the tools the
// subject may not use.
func (e *endpoint) rawTools(ctx context.Context, s *agentSession, conn *Connection, params *mcp.ListToolsParams) (mcp.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, e.p.timeout)
	defer cancel()
	st, err := e.p.state(conn)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	err = e.p.guarded(ctx, st, &s.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		raw, err = e.p.exchange(ctx, st, cs, "tools/list", params, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	unreadable := &UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be read"}
	var page map[string]json.RawMessage
	var entries []json.RawMessage
	if json.Unmarshal(raw, &page) != nil || json.Unmarshal(page["tools"], &entries) != nil {
		return nil, unreadable
	}
	tools := make([]*mcp.Tool, len(entries))
	for i, t := range entries {
		tools[i] = &mcp.Tool{}
		if json.Unmarshal(t, tools[i]) != nil {
			return nil, unreadable
		}
	}
	var next string
	_ = json.Unmarshal(page["nextCursor"], &next)
	snap := s.tools.Load()
	if params.Cursor == "" && next == "" {
		snap, err = e.keepTools(s, st, tools)
	} else if snap == nil {
		snap, err = e.sessionTools(ctx, s, st)
	}
	if err != nil {
		return nil, err
	}
	kept := make([]json.RawMessage, 0, len(entries))
	for i, t := range tools {
		if _, ok := snap.byName[t.Name]; ok && conn.Policy.Explain(s.caller.Subject, t.Name, snap.names).Allowed {
			kept = append(kept, entries[i])
		}
	}
	if page["tools"], err = json.Marshal(kept); err == nil {
		raw, err = json.Marshal(page)
	}
	if err != nil {
		return nil, unreadable
	}
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return nil, &UpstreamError{ConnectionID: conn.ID, Message: "tools/list returned tools that cannot be checked for secrets"}
	}
	return &mcptasks.Result{Raw: *clean}, nil
}

// tapped returns hc with its transport under a tap telling offer and
// status (package mcptasks).
func tapped(hc *http.Client, offer func(*mcptasks.Offer), status func(json.RawMessage)) *http.Client {
	return &http.Client{Transport: &mcptasks.Tap{Base: hc.Transport, Offer: offer, Status: status}, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar, Timeout: hc.Timeout}
}
