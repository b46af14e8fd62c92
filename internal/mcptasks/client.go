package mcptasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The client side of tasks: the tasks a client runs for the server, when
// the server asks it for a sampling or an elicitation as a task, and
// polls, fetches, lists and cancels them. The gateway relays them to an
// agent, and idn mcp to its stdio client. Both:
//   - declare the client's capability in the initialize the SDK's client
//     sends (DeclaringRequest);
//   - take the server's requests out of the event streams the SDK's
//     client reads (Divert, ClientRequest), since that client would drop
//     a request's task or answer "method not found";
//   - bind each task the client creates to the session it was created
//     for (Bindings).

// MaxBound bounds the client-side task ids a session keeps: past it, the
// oldest is forgotten (and the server's requests about it are answered
// NotFound).
const MaxBound = 1024

// NotFound is the answer to a server's request about a task the client
// did not create for the asking session, worded as the reference SDKs
// word an unknown one.
var NotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// ClientCaps is the part of a client's tasks capability that is relayed;
// nil fields were not declared.
type ClientCaps struct {
	List     json.RawMessage `json:"list,omitempty"`
	Cancel   json.RawMessage `json:"cancel,omitempty"`
	Requests *ClientRequests `json:"requests,omitempty"`
}

// ClientRequests are the requests a client runs as tasks.
type ClientRequests struct {
	Sampling *struct {
		CreateMessage json.RawMessage `json:"createMessage,omitempty"`
	} `json:"sampling,omitempty"`
	Elicitation *struct {
		Create json.RawMessage `json:"create,omitempty"`
	} `json:"elicitation,omitempty"`
}

// Augmentable reports whether c lets method be sent as a task.
func (c *ClientCaps) Augmentable(method string) bool {
	if c == nil || c.Requests == nil {
		return false
	}
	switch method {
	case "sampling/createMessage":
		return c.Requests.Sampling != nil && present(c.Requests.Sampling.CreateMessage)
	case "elicitation/create":
		return c.Requests.Elicitation != nil && present(c.Requests.Elicitation.Create)
	}
	return false
}

// present reports whether a capability was declared: a member, not null.
func present(raw json.RawMessage) bool { return raw != nil && string(raw) != "null" }

// orNil is raw when present, else nil.
func orNil(raw json.RawMessage) json.RawMessage {
	if present(raw) {
		return raw
	}
	return nil
}

// Declared returns what the server is told of the tasks capability of a
// client whose initialize request is body. That is its list and cancel,
// and task-augmented sampling and elicitation where it declared sampling
// and elicitation themselves; no other part is relayed. It returns nil
// when none of it passes, or the client asks for a version without tasks.
func Declared(body []byte) *ClientCaps {
	var msg struct {
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Sampling    json.RawMessage `json:"sampling"`
				Elicitation json.RawMessage `json:"elicitation"`
				Tasks       *ClientCaps     `json:"tasks"`
			} `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Params.ProtocolVersion < Version || msg.Params.Capabilities.Tasks == nil {
		return nil
	}
	client := msg.Params.Capabilities
	out := &ClientCaps{List: orNil(client.Tasks.List), Cancel: orNil(client.Tasks.Cancel)}
	req := &ClientRequests{}
	if present(client.Sampling) && client.Tasks.Augmentable("sampling/createMessage") {
		req.Sampling = client.Tasks.Requests.Sampling
	}
	if present(client.Elicitation) && client.Tasks.Augmentable("elicitation/create") {
		req.Elicitation = client.Tasks.Requests.Elicitation
	}
	if req.Sampling != nil || req.Elicitation != nil {
		out.Requests = req
	}
	if out.List == nil && out.Cancel == nil && out.Requests == nil {
		return nil
	}
	return out
}

// DeclaringRequest returns the initialize request req, which an SDK's
// client made, with caps as its client's tasks capability.
func DeclaringRequest(req *http.Request, caps *ClientCaps) (*http.Request, error) {
	// The body is the SDK's client's own.
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	if out, ok := withClientCaps(body, caps); ok {
		body = out
	}
	clone := req.Clone(req.Context())
	clone.Body = io.NopCloser(bytes.NewReader(body))
	clone.ContentLength = int64(len(body))
	clone.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return clone, nil
}

// withClientCaps returns the initialize request body with caps as its
// client's tasks capability; false when body is not an initialize
// request.
func withClientCaps(body []byte, caps *ClientCaps) ([]byte, bool) {
	var msg, params, capabilities map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || string(msg["method"]) != `"initialize"` ||
		json.Unmarshal(msg["params"], &params) != nil || json.Unmarshal(params["capabilities"], &capabilities) != nil {
		return nil, false
	}
	if capabilities == nil {
		capabilities = map[string]json.RawMessage{}
	}
	var err error
	if capabilities["tasks"], err = json.Marshal(caps); err != nil {
		return nil, false
	}
	if params["capabilities"], err = json.Marshal(capabilities); err != nil {
		return nil, false
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil, false
	}
	out, err := json.Marshal(msg)
	return out, err == nil
}

// ClientRequest reports whether a message of method with id and params
// is a server's request of the client side of tasks that a client of
// caps may be sent: a request (id set) of a ClientMethod.
func ClientRequest(caps *ClientCaps, id json.RawMessage, method string, params json.RawMessage) bool {
	return id != nil && ClientMethod(caps, method, params)
}

// ClientMethod reports whether method with params is of the client side
// of tasks, for a client of caps: a tasks method, or a sampling or
// elicitation asked for as a task that caps lets the server send.
func ClientMethod(caps *ClientCaps, method string, params json.RawMessage) bool {
	switch method {
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		return true
	case "sampling/createMessage", "elicitation/create":
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		return caps.Augmentable(method) && json.Unmarshal(params, &p) == nil && p.Task != nil
	}
	return false
}

// Divert returns the event stream body minus the events divert takes:
// it is told the data of each event, empty for one without data, and
// reports whether it takes the event.
func Divert(body io.ReadCloser, divert func(data []byte) bool) io.ReadCloser {
	return &diverted{body: body, lines: bufio.NewReader(body), divert: divert}
}

type diverted struct {
	body    io.ReadCloser
	lines   *bufio.Reader
	divert  func(data []byte) bool
	event   []byte // the event being read
	pending []byte // what is passed on next
	err     error  // the body's, returned once pending is read
}

func (d *diverted) Close() error { return d.body.Close() }

func (d *diverted) Read(p []byte) (int, error) {
	for len(d.pending) == 0 && d.err == nil {
		line, err := d.lines.ReadBytes('\n')
		d.event = append(d.event, line...)
		switch {
		case err != nil:
			d.pending, d.event, d.err = d.event, nil, err
		case len(bytes.TrimRight(line, "\r\n")) == 0:
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

// Bindings binds each client-side task id to the session it was created
// for, at most MaxBound of them (the oldest forgotten first). Its zero
// value binds none.
type Bindings struct {
	mu    sync.Mutex
	bound map[string]string // task id → session id
	order []string          // bound, oldest first
}

// Bind binds task id to session.
func (b *Bindings) Bind(id, session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bound == nil {
		b.bound = map[string]string{}
	}
	if _, ok := b.bound[id]; !ok {
		if len(b.order) >= MaxBound {
			delete(b.bound, b.order[0])
			b.order = b.order[1:]
		}
		b.order = append(b.order, id)
	}
	b.bound[id] = session
}

// Session returns the session task id is bound to; false when none.
func (b *Bindings) Session(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	session, ok := b.bound[id]
	return session, ok && id != ""
}

// Bound reports whether task id is bound to session.
func (b *Bindings) Bound(id, session string) bool {
	got, ok := b.Session(id)
	return ok && got == session
}

// List returns the client's tasks/list page raw with only the tasks
// bound to session.
func (b *Bindings) List(raw json.RawMessage, session string) (json.RawMessage, error) {
	return KeepTasks(raw, func(id string) bool { return b.Bound(id, session) })
}

// Answers are the requests written to a client whose answers are awaited,
// by request id; M is the caller's decoding of a message. The zero value
// is ready to use.
type Answers[M any] struct {
	mu      sync.Mutex
	pending map[string]chan M
}

// Await registers request id and returns the channel its answer arrives
// on, and done, which forgets id once the caller stops waiting.
func (a *Answers[M]) Await(id string) (answer <-chan M, done func()) {
	ch := make(chan M, 1)
	a.mu.Lock()
	if a.pending == nil {
		a.pending = map[string]chan M{}
	}
	a.pending[id] = ch
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}
}

// Deliver hands msg, an answer whose id is rawID (JSON), to the request
// waiting on it, and reports whether one was.
func (a *Answers[M]) Deliver(rawID json.RawMessage, msg M) bool {
	if len(rawID) == 0 || rawID[0] != '"' {
		return false
	}
	var id string
	if json.Unmarshal(rawID, &id) != nil {
		return false
	}
	a.mu.Lock()
	ch, ok := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if ok {
		ch <- msg
	}
	return ok
}
