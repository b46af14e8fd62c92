package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The client side of tasks through idn mcp: the tasks the stdio client
// runs for the server, when the server asks it for a sampling or an
// elicitation as a task, and the server's requests about them. Neither the
// go-sdk's server nor its client has a model of them, so the bridge
// carries them as JSON, as the gateway does: the tasks capability the
// stdio client declared in its initialize (read off stdin) is added to the
// gateway session's initialize; the gateway's requests of the client side
// of tasks are taken out of the event streams the SDK's client reads
// (which would drop a request's task, or answer "method not found"),
// written to stdout as requests of the bridge's own, and the stdio
// client's answers, taken off stdin, posted back; the stdio client's task
// status notifications go to the gateway.
//
// A task is bound to the gateway session it was created for: the
// gateway's requests about any other task id are answered "task not
// found" without asking the stdio client, and a tasks/list page keeps
// only the bound tasks, whatever the gateway sends.

// clientTaskIDPrefix starts the id of each request the bridge writes to
// the stdio client on the gateway's behalf.
const clientTaskIDPrefix = "idn-ct-"

// maxClientTasks bounds the task ids the bridge keeps; past it, the
// oldest is forgotten.
const maxClientTasks = 1024

// streamWait bounds how long the answer to the stdio client's initialize
// waits for the gateway session's own stream, on which the gateway sends
// requests of the client side of tasks (without one open, it asks them
// as plain requests).
const streamWait = 5 * time.Second

// taskNotFound is the answer to a request about a task the stdio client
// did not create through this gateway session, worded as the gateway and
// the reference SDKs word an unknown one.
var taskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// clientTaskCaps is the part of a client's tasks capability that is
// relayed; nil fields were not declared.
type clientTaskCaps struct {
	List     json.RawMessage `json:"list,omitempty"`
	Cancel   json.RawMessage `json:"cancel,omitempty"`
	Requests *struct {
		Sampling *struct {
			CreateMessage json.RawMessage `json:"createMessage,omitempty"`
		} `json:"sampling,omitempty"`
		Elicitation *struct {
			Create json.RawMessage `json:"create,omitempty"`
		} `json:"elicitation,omitempty"`
	} `json:"requests,omitempty"`
}

// augmentable reports whether c lets method be sent as a task.
func (c *clientTaskCaps) augmentable(method string) bool {
	if c == nil || c.Requests == nil {
		return false
	}
	switch method {
	case "sampling/createMessage":
		return c.Requests.Sampling != nil && declared(c.Requests.Sampling.CreateMessage)
	case "elicitation/create":
		return c.Requests.Elicitation != nil && declared(c.Requests.Elicitation.Create)
	}
	return false
}

// declared reports whether a capability was declared: a member, not null.
func declared(raw json.RawMessage) bool { return raw != nil && string(raw) != "null" }

// declaredClientTasks is what the gateway session is told of the tasks
// capability of the stdio client whose initialize request is line: its
// list and cancel, and task-augmented sampling and elicitation where it
// declared sampling and elicitation themselves (the bridge relays no
// others); nil when none of it passes, or the client asks for a version
// without tasks.
func declaredClientTasks(line []byte) *clientTaskCaps {
	var msg struct {
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Sampling    json.RawMessage `json:"sampling"`
				Elicitation json.RawMessage `json:"elicitation"`
				Tasks       *clientTaskCaps `json:"tasks"`
			} `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Params.ProtocolVersion < mcptasks.Version || msg.Params.ProtocolVersion > maxRelayedVersion || msg.Params.Capabilities.Tasks == nil {
		return nil
	}
	client := msg.Params.Capabilities
	out := &clientTaskCaps{}
	if declared(client.Tasks.List) {
		out.List = client.Tasks.List
	}
	if declared(client.Tasks.Cancel) {
		out.Cancel = client.Tasks.Cancel
	}
	if client.Tasks.Requests != nil {
		out.Requests = client.Tasks.Requests
		if !declared(client.Sampling) || !client.Tasks.augmentable("sampling/createMessage") {
			out.Requests.Sampling = nil
		}
		if !declared(client.Elicitation) || !client.Tasks.augmentable("elicitation/create") {
			out.Requests.Elicitation = nil
		}
		if out.Requests.Sampling == nil && out.Requests.Elicitation == nil {
			out.Requests = nil
		}
	}
	if out.List == nil && out.Cancel == nil && out.Requests == nil {
		return nil
	}
	return out
}

// jsonrpcMessage is any JSON-RPC message, as far as the bridge reads it.
type jsonrpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *jsonrpc.Error  `json:"error,omitempty"`
}

// gatewaySession is the gateway session a request came on.
type gatewaySession struct {
	id, version string // its Mcp-Session-Id and Mcp-Protocol-Version
}

// clientTasks is what the bridge keeps of the client side of tasks. It
// relays nothing until the stdio client declares the capability.
type clientTasks struct {
	ctx      context.Context // ends when the bridge does
	endpoint string
	post     http.RoundTripper // signs what the bridge posts to the gateway
	out      io.Writer         // stdout, one whole message per Write
	wg       sync.WaitGroup    // the requests being answered, the notifications being posted

	caps atomic.Pointer[clientTaskCaps]
	next atomic.Uint64 // numbers the requests written to the stdio client

	mu      sync.Mutex
	owned   map[string]gatewaySession // task id → the gateway session it was created for
	order   []string                  // owned, oldest first
	pending map[string]chan jsonrpcMessage
	streams map[string]chan struct{} // gateway session id → closed once its own stream is open
}

// fromClient reads line, a message of the stdio client, and reports
// whether it is the bridge's to handle rather than the SDK's server's: an
// answer to a request the bridge wrote, or a task status notification.
// An initialize request declares the client's capability.
func (c *clientTasks) fromClient(line []byte) bool {
	initialize := bytes.Contains(line, []byte(`"initialize"`))
	if !initialize && !bytes.Contains(line, []byte(clientTaskIDPrefix)) && !bytes.Contains(line, []byte(mcptasks.StatusMethod)) {
		return false
	}
	var msg jsonrpcMessage
	if json.Unmarshal(line, &msg) != nil {
		return false
	}
	switch {
	case msg.Method == "initialize":
		c.caps.Store(declaredClientTasks(line))
		return false
	case msg.Method == "" && len(msg.ID) > 0 && msg.ID[0] == '"':
		id, err := strconv.Unquote(string(msg.ID))
		if err != nil {
			return false
		}
		c.mu.Lock()
		answer, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			answer <- msg
		}
		return ok
	case msg.Method == mcptasks.StatusMethod && msg.ID == nil && c.caps.Load() != nil:
		var p struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		c.mu.Lock()
		up, ok := c.owned[p.TaskID]
		c.mu.Unlock()
		if ok && p.TaskID != "" {
			c.wg.Go(func() { c.send(up, map[string]any{"jsonrpc": "2.0", "method": msg.Method, "params": msg.Params}) })
		}
		return true // a status of no task of this bridge's goes nowhere
	}
	return false
}

// transport returns base declaring the stdio client's capability in the
// gateway session's initialize, and taking the gateway's requests of the
// client side of tasks out of the event streams the SDK's client reads,
// each answered by the stdio client.
func (c *clientTasks) transport(base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		caps := c.caps.Load()
		if caps == nil {
			return base.RoundTrip(req)
		}
		if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" && req.Body != nil {
			declaring, err := withClientTasks(req, caps)
			if err != nil {
				return nil, err
			}
			req = declaring
		}
		resp, err := base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp, err
		}
		up := gatewaySession{id: req.Header.Get("Mcp-Session-Id"), version: req.Header.Get("Mcp-Protocol-Version")}
		var opened func()
		if req.Method == http.MethodGet {
			opened = sync.OnceFunc(func() { close(c.stream(up.id)) })
		}
		resp.Body = &divertedEvents{body: resp.Body, lines: bufio.NewReader(resp.Body), opened: opened, divert: func(data []byte) bool {
			var msg jsonrpcMessage
			if !bytes.Contains(data, []byte(`"method"`)) || json.Unmarshal(data, &msg) != nil || !clientTaskRequest(caps, msg) {
				return false
			}
			c.wg.Go(func() { c.answer(req.Context(), up, msg) })
			return true
		}}
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// stream is the channel closed once the own stream of gateway session id
// is open.
func (c *clientTasks) stream(id string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams == nil {
		c.streams = map[string]chan struct{}{}
	}
	ch, ok := c.streams[id]
	if !ok {
		ch = make(chan struct{})
		c.streams[id] = ch
	}
	return ch
}

// awaitStream returns once the own stream of gateway session id is open,
// or after streamWait, when the stdio client declared the capability.
func (c *clientTasks) awaitStream(ctx context.Context, id string) {
	if c.caps.Load() == nil {
		return
	}
	t := time.NewTimer(streamWait)
	defer t.Stop()
	select {
	case <-c.stream(id):
	case <-t.C:
	case <-ctx.Done():
	}
}

// withClientTasks returns the initialize request req with caps as its
// client's tasks capability.
func withClientTasks(req *http.Request, caps *clientTaskCaps) (*http.Request, error) {
	// The body is the bridge's own client's.
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	var msg, params, capabilities map[string]json.RawMessage
	if json.Unmarshal(body, &msg) == nil && string(msg["method"]) == `"initialize"` &&
		json.Unmarshal(msg["params"], &params) == nil && json.Unmarshal(params["capabilities"], &capabilities) == nil {
		if capabilities == nil {
			capabilities = map[string]json.RawMessage{}
		}
		capabilities["tasks"], _ = json.Marshal(caps)
		params["capabilities"], _ = json.Marshal(capabilities)
		msg["params"], _ = json.Marshal(params)
		if out, err := json.Marshal(msg); err == nil {
			body = out
		}
	}
	clone := req.Clone(req.Context())
	clone.Body = io.NopCloser(bytes.NewReader(body))
	clone.ContentLength = int64(len(body))
	clone.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return clone, nil
}

// clientTaskRequest reports whether msg is a request of the client side
// of tasks: a tasks method, or a sampling or elicitation asked for as a
// task that caps lets the server send.
func clientTaskRequest(caps *clientTaskCaps, msg jsonrpcMessage) bool {
	if msg.ID == nil {
		return false
	}
	switch msg.Method {
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		return true
	case "sampling/createMessage", "elicitation/create":
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		return caps.augmentable(msg.Method) && json.Unmarshal(msg.Params, &p) == nil && p.Task != nil
	}
	return false
}

// answer has the stdio client answer msg, a request the gateway sent on
// session up, and posts the answer to the gateway.
func (c *clientTasks) answer(ctx context.Context, up gatewaySession, msg jsonrpcMessage) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	res, err := c.ask(ctx, up, msg.Method, msg.Params)
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		reply["error"] = je
	case err != nil:
		reply["error"] = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "idn: " + msg.Method + " was not answered"}
	default:
		reply["result"] = res
	}
	c.send(up, reply)
}

// send posts msg to the gateway on session up.
func (c *clientTasks) send(up gatewaySession, msg any) {
	body, err := json.Marshal(msg)
	if err != nil {
		return
	}
	post, err := http.NewRequest(http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return
	}
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Accept", "application/json, text/event-stream")
	post.Header.Set("Mcp-Session-Id", up.id)
	post.Header.Set("Mcp-Protocol-Version", up.version)
	if resp, err := c.post.RoundTrip(post); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// ask relays a request of method with params raw, which the gateway sent
// on session up, to the stdio client as a request of the bridge's own,
// and returns its answer as it wrote it. A task the client creates is
// bound to up; a request about any other task is answered taskNotFound
// without asking. When ctx ends first, the client is told the request is
// cancelled.
func (c *clientTasks) ask(ctx context.Context, up gatewaySession, method string, raw json.RawMessage) (json.RawMessage, error) {
	caps := c.caps.Load()
	switch {
	case method == "tasks/list" && caps.List == nil, method == "tasks/cancel" && caps.Cancel == nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + method + " is not offered by this client"}
	case method == "tasks/get" || method == "tasks/result" || method == "tasks/cancel":
		var p struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(raw, &p) != nil || !c.bound(p.TaskID, up) {
			return nil, taskNotFound
		}
	}
	id := clientTaskIDPrefix + strconv.FormatUint(c.next.Add(1), 10)
	answer := make(chan jsonrpcMessage, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.pending = map[string]chan jsonrpcMessage{}
	}
	c.pending[id] = answer
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": raw})
	var in jsonrpcMessage
	select {
	case in = <-answer:
	case <-ctx.Done():
		c.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
			"params": map[string]string{"requestId": id, "reason": "the gateway's request ended"}})
		return nil, ctx.Err()
	}
	if in.Error != nil {
		return nil, in.Error
	}
	switch method {
	case "sampling/createMessage", "elicitation/create":
		if id, ok := mcptasks.Created(in.Result); ok {
			c.own(id, up)
		}
	case "tasks/list":
		list, err := c.ownList(in.Result, up)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks/list: the client's answer cannot be read"}
		}
		return list, nil
	}
	return in.Result, nil
}

// write writes msg to the stdio client.
func (c *clientTasks) write(msg any) {
	if out, err := json.Marshal(msg); err == nil {
		_, _ = c.out.Write(append(out, '\n'))
	}
}

// own binds task id to gateway session up.
func (c *clientTasks) own(id string, up gatewaySession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned == nil {
		c.owned = map[string]gatewaySession{}
	}
	if _, ok := c.owned[id]; !ok {
		if len(c.order) >= maxClientTasks {
			delete(c.owned, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, id)
	}
	c.owned[id] = up
}

// bound reports whether task id was created for gateway session up.
func (c *clientTasks) bound(id string, up gatewaySession) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.owned[id]
	return ok && id != "" && got.id == up.id
}

// ownList returns the stdio client's tasks/list page with only the tasks
// bound to gateway session up.
func (c *clientTasks) ownList(raw json.RawMessage, up gatewaySession) (json.RawMessage, error) {
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
		if json.Unmarshal(t, &task) == nil && c.bound(task.TaskID, up) {
			kept = append(kept, t)
		}
	}
	var err error
	if page["tasks"], err = json.Marshal(kept); err != nil {
		return nil, err
	}
	return json.Marshal(page)
}

// divertedEvents is an event stream the SDK's client reads, minus the
// events divert takes; opened, when set, is called at its first event.
type divertedEvents struct {
	body    io.ReadCloser
	lines   *bufio.Reader
	divert  func(data []byte) bool
	opened  func()
	event   []byte // the event being read
	pending []byte // what is passed on next
	err     error  // the body's, returned once pending is read
}

func (d *divertedEvents) Close() error { return d.body.Close() }

func (d *divertedEvents) Read(p []byte) (int, error) {
	for len(d.pending) == 0 && d.err == nil {
		line, err := d.lines.ReadBytes('\n')
		d.event = append(d.event, line...)
		switch {
		case err != nil:
			d.pending, d.event, d.err = d.event, nil, err
		case len(bytes.TrimRight(line, "\r\n")) == 0:
			if d.opened != nil {
				d.opened()
			}
			if !d.divert(eventData(d.event)) {
				d.pending = d.event
			}
			d.event = nil
		}
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	if len(d.pending) == 0 && d.err != nil {
		return n, d.err
	}
	return n, nil
}

// eventData is the data of an event.
func eventData(event []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(event, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(out) > 0 {
				out = append(out, '\n')
			}
			out = append(out, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	return out
}
