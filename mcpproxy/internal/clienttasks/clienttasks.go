// Package clienttasks relays the client side of MCP tasks (protocol
// version 2025-11-25) through an agent session of the MCP endpoint: the
// tasks an agent runs for the server, when the server asks it for a
// sampling or an elicitation as a task, and polls, fetches, lists and
// cancels them. The go-sdk has no model of them: its client declares no
// tasks capability and drops a request's task, its server cannot send one.
// So the agent's capability is added to the upstream initialize (Relay's
// Transport, which also takes those requests out of the streams the SDK's
// client reads), and those requests go to the agent as JSON on its
// session's own event stream (Ask), answered by its POSTs (Answered).
//
// Every client-side task is bound to the agent session that created it
// and to the upstream session it was created for: the server's requests
// about any other id are answered NotFound without asking the agent, and
// a tasks/list page keeps only the tasks bound to the upstream session
// that asks, so neither another agent's tasks nor those an earlier
// upstream session created can be reached. The agent's status
// notifications reach only the upstream session its task is bound to.
package clienttasks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrNoStream: the agent session has no event stream open to carry a
// request.
var ErrNoStream = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpproxy: the agent has no event stream open to receive the request"}

// Upstream is the upstream session a server's request came on.
type Upstream struct {
	ID      string // its Mcp-Session-Id
	Version string // the protocol version it settled on
}

type upstreamKey struct{}

// WithUpstream returns ctx carrying up, the upstream session of the
// server's request being answered in ctx.
func WithUpstream(ctx context.Context, up Upstream) context.Context {
	return context.WithValue(ctx, upstreamKey{}, up)
}

// Relay is what an agent session keeps of the client side of tasks. Its
// zero value relays nothing until Declare.
type Relay struct {
	caps  atomic.Pointer[mcptasks.ClientCaps]
	tasks mcptasks.Bindings // to the upstream session ids they were created for

	answers mcptasks.Answers[wire.Incoming] // to the requests written to the agent
	asking  sync.Map                        // the server's requests being answered, by askKey: *asking
}

// Declare records what the agent's initialize request body declares
// (mcptasks.Declared).
func (r *Relay) Declare(body []byte) {
	if c := mcptasks.Declared(body); c != nil {
		r.caps.Store(c)
	}
}

// Transport returns base (nil: http.DefaultTransport) adding the declared
// capability to the initialize request the upstream session opens with,
// and taking out of the event streams the SDK's client reads the server's
// requests of the client side of tasks: each is answered by ask, in a
// context carrying its upstream session (WithUpstream) that ends with its
// stream or after timeout, and the answer posted to the server within
// hold.ReplyTimeout; one the server withdraws (notifications/cancelled,
// read on any stream of its session) ends at once, and no answer is
// posted. Base bounds how many are answered at once (package hold): it
// is told of each request answered without a post (unanswered; nil:
// nothing is told).
func (r *Relay) Transport(base http.RoundTripper, timeout time.Duration, ask Asker, unanswered func(session string, id json.RawMessage)) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if unanswered == nil {
		unanswered = func(string, json.RawMessage) {}
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		caps := r.caps.Load()
		if caps == nil {
			return base.RoundTrip(req)
		}
		if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" && req.Body != nil {
			declaring, err := mcptasks.DeclaringRequest(req, caps)
			if err != nil {
				return nil, err
			}
			return base.RoundTrip(declaring)
		}
		resp, err := base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp, err
		}
		resp.Body = mcptasks.Divert(resp.Body, func(data []byte) bool {
			if bytes.Contains(data, []byte(`"notifications/cancelled"`)) {
				r.withdraw(req.Header.Get("Mcp-Session-Id"), data)
				return false // the SDK's client ignores it: not one of its requests
			}
			var msg wire.Incoming
			if !bytes.Contains(data, []byte(`"method"`)) || json.Unmarshal(data, &msg) != nil || !mcptasks.ClientRequest(caps, msg.ID, msg.Method, msg.Params) {
				return false
			}
			go func() {
				defer unanswered(req.Header.Get("Mcp-Session-Id"), msg.ID)
				r.answer(req, base, timeout, ask, msg)
			}()
			return true
		})
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Handles reports whether a server's request of method with params raw,
// received in ctx, is the client side of tasks and relayed by Ask: a
// tasks method, or a sampling or elicitation the server asks for as a
// task, on an upstream session (WithUpstream) and an agent session
// (agentVersion) that both settled on a version with tasks, from an
// agent that declared it. A sampling or elicitation is relayed as a task
// only to an agent with a stream open to receive it (streaming); any
// other is asked as a plain one, the task dropped, which a server must
// take.
func (r *Relay) Handles(ctx context.Context, agentVersion *string, streaming bool, method string, raw json.RawMessage) bool {
	caps := r.caps.Load()
	up, ok := ctx.Value(upstreamKey{}).(Upstream)
	if caps == nil || !ok || up.Version < mcptasks.Version || agentVersion == nil || *agentVersion < mcptasks.Version {
		return false
	}
	if !streaming && (method == "sampling/createMessage" || method == "elicitation/create") {
		return false
	}
	return mcptasks.ClientMethod(caps, method, raw)
}

// Outcome is what became of a server's request Ask relayed, for the
// counters: relayed (the agent answered, with a result or an error),
// not_owned (a task not the session's, answered NotFound), not_offered
// (a method the agent did not declare), no_stream (nowhere to send it),
// or error (the request ended before the agent answered).
type Outcome string

// Ask relays a server's request of method with params raw, received in
// ctx on the upstream session WithUpstream set, to the agent: written by
// send as a request of its own on the agent session's event stream
// (secrets replaced by sc), with an id of the gateway's, and the agent's
// answer returned as it wrote it. A task the agent creates is bound to
// the session and the upstream session; a request about any other task
// is answered NotFound without asking. When ctx ends first, the agent is
// told the request is cancelled.
func (r *Relay) Ask(ctx context.Context, sc *scrub.Scrubber, method string, raw json.RawMessage, send func(msg []byte) bool) (json.RawMessage, Outcome, error) {
	caps := r.caps.Load()
	up, _ := ctx.Value(upstreamKey{}).(Upstream)
	switch {
	case method == "tasks/list" && caps.List == nil, method == "tasks/cancel" && caps.Cancel == nil:
		return nil, "not_offered", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + method + " is not offered by this client"}
	case method == "tasks/get" || method == "tasks/result" || method == "tasks/cancel":
		var p struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(raw, &p) != nil || !r.tasks.Bound(p.TaskID, up.ID) {
			return nil, "not_owned", mcptasks.NotFound
		}
	}
	if len(raw) > 0 {
		clean, err := scrub.Launder(sc, &raw)
		if err != nil {
			return nil, "error", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + ": params that cannot be checked for secrets"}
		}
		raw = *clean
	}
	id := "idn-ct-" + rand.Text()
	answer, done := r.answers.Await(id)
	defer done()
	msg, err := json.Marshal(wire.Request{JSONRPC: "2.0", ID: id, Method: method, Params: raw})
	if err != nil {
		return nil, "error", err
	}
	if !send(msg) {
		return nil, "no_stream", ErrNoStream
	}
	var in wire.Incoming
	select {
	case in = <-answer:
	case <-ctx.Done():
		cancelled, _ := json.Marshal(wire.Request{JSONRPC: "2.0", Method: "notifications/cancelled", Params: map[string]string{"requestId": id, "reason": "the server's request ended"}})
		send(cancelled)
		return nil, "error", ctx.Err()
	}
	if in.Error != nil {
		return nil, "relayed", in.Error
	}
	switch method {
	case "sampling/createMessage", "elicitation/create":
		if id, ok := mcptasks.Created(in.Result); ok {
			r.tasks.Bind(id, up.ID)
		}
	case "tasks/list":
		list, err := r.tasks.List(in.Result, up.ID)
		if err != nil {
			return nil, "error", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks/list: the agent's answer cannot be read"}
		}
		return list, "relayed", nil
	}
	return in.Result, "relayed", nil
}

// Answered hands the agent's POST body to the request Ask waits on, when
// it is the answer to one, and reports whether it was.
func (r *Relay) Answered(body []byte) bool {
	if r.caps.Load() == nil || !bytes.Contains(body, []byte(`"idn-ct-`)) {
		return false
	}
	var in wire.Incoming
	if json.Unmarshal(body, &in) != nil || in.Method != "" {
		return false
	}
	return r.answers.Deliver(in.ID, in)
}

// ErrNotOwned: a status notification about a task the session did not
// create.
var ErrNotOwned = errors.New("clienttasks: not a task of this session")

// Status returns the params of the agent's POST body when it is a task
// status notification, and the upstream session its task is bound to;
// ErrNotOwned when the task is not the session's, ok false when body is
// no status notification.
func (r *Relay) Status(body []byte) (params json.RawMessage, upstreamID string, ok bool, err error) {
	if r.caps.Load() == nil || !bytes.Contains(body, []byte(mcptasks.StatusMethod)) {
		return nil, "", false, nil
	}
	var in wire.Incoming
	if json.Unmarshal(body, &in) != nil || in.Method != mcptasks.StatusMethod || in.ID != nil {
		return nil, "", false, nil
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(in.Params, &p)
	up, owned := r.tasks.Session(p.TaskID)
	if !owned {
		return nil, "", true, ErrNotOwned
	}
	return in.Params, up, true, nil
}
