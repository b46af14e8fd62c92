package main

import (
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

// The client side of tasks through idn mcp. These are the tasks the stdio
// client runs for the server, when the server asks it for a sampling or an
// elicitation as a task, and the server's requests about them.
//
// Neither the go-sdk's server nor its client has a model of them. So the
// bridge carries them as JSON, as the gateway does, with the parts of
// package mcptasks it shares with the gateway:
//   - The tasks capability the stdio client declared in its initialize
//     (read off stdin) is added to the gateway session's initialize.
//   - The gateway's requests of the client side of tasks are taken out of
//     the event streams the SDK's client reads. That client would drop a
//     request's task, or answer "method not found".
//   - Those requests are written to stdout as the bridge's own. The stdio
//     client's answers are taken off stdin and posted back.
//   - The stdio client's task status notifications go to the gateway.
//
// A task is bound to the gateway session it was created for. The
// gateway's requests about any other task id are answered "task not
// found" without asking the stdio client. A tasks/list page keeps only
// the bound tasks, whatever the gateway sends.

// clientTaskIDPrefix starts the id of each request the bridge writes to
// the stdio client on the gateway's behalf.
const clientTaskIDPrefix = "idn-ct-"

// streamWait bounds how long the answer to the stdio client's initialize
// waits for the gateway session's own stream. The gateway sends requests
// of the client side of tasks on that stream; without one open, it asks
// them as plain requests.
const streamWait = 5 * time.Second

// jsonrpcMessage is any JSON-RPC message, as far as the bridge reads it.
type jsonrpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *jsonrpc.Error  `json:"error,omitempty"`
}

// clientTasks is what the bridge keeps of the client side of tasks. It
// relays nothing until the stdio client declares the capability.
type clientTasks struct {
	ctx      context.Context // ends when the bridge does
	endpoint string
	post     http.RoundTripper // signs what the bridge posts to the gateway
	out      io.Writer         // stdout, one whole message per Write
	wg       sync.WaitGroup    // the requests being answered, the notifications being posted

	caps  atomic.Pointer[mcptasks.ClientCaps]
	next  atomic.Uint64     // numbers the requests written to the stdio client
	tasks mcptasks.Bindings // to the gateway session ids they were created for

	answers mcptasks.Answers[jsonrpcMessage] // to the requests written to the stdio client

	mu      sync.Mutex
	asking  map[string]context.CancelFunc // the gateway's requests being answered, by session and request id
	streams map[string]chan struct{}      // gateway session id → closed once its own stream is open, while it is or one is awaited
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
		c.caps.Store(mcptasks.Declared(line))
		return false
	case msg.Method == "":
		return c.answers.Deliver(msg.ID, msg)
	case msg.Method == mcptasks.StatusMethod && msg.ID == nil && c.caps.Load() != nil:
		var p struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		if session, ok := c.tasks.Session(p.TaskID); ok {
			c.wg.Go(func() { c.send(session, map[string]any{"jsonrpc": "2.0", "method": msg.Method, "params": msg.Params}) })
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
			declaring, err := mcptasks.DeclaringRequest(req, caps)
			if err != nil {
				return nil, err
			}
			req = declaring
		}
		resp, err := base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp, err
		}
		session := req.Header.Get("Mcp-Session-Id")
		opened := func() {}
		if req.Method == http.MethodGet {
			opened = sync.OnceFunc(func() { c.streamOpened(session) })
			resp.Body = closing{resp.Body, sync.OnceFunc(func() { c.forget(session) })}
		}
		resp.Body = mcptasks.Divert(resp.Body, func(data []byte) bool {
			opened() // at the stream's first event
			var msg jsonrpcMessage
			if !bytes.Contains(data, []byte(`"method"`)) || json.Unmarshal(data, &msg) != nil {
				return false
			}
			if msg.Method == "notifications/cancelled" {
				return c.cancelled(session, msg.Params)
			}
			if !mcptasks.ClientRequest(caps, msg.ID, msg.Method, msg.Params) {
				return false
			}
			ctx, cancel := context.WithCancel(req.Context())
			key := session + " " + string(msg.ID)
			c.mu.Lock()
			if c.asking == nil {
				c.asking = map[string]context.CancelFunc{}
			}
			c.asking[key] = cancel
			c.mu.Unlock()
			c.wg.Go(func() {
				defer func() {
					c.mu.Lock()
					delete(c.asking, key)
					c.mu.Unlock()
					cancel()
				}()
				c.answer(ctx, session, msg)
			})
			return true
		})
		return resp, nil
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// closing is a response body that calls done when it is closed.
type closing struct {
	io.ReadCloser
	done func()
}

func (b closing) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// stream is the channel closed once the own stream of gateway session id
// is open (c.mu held).
func (c *clientTasks) stream(id string) chan struct{} {
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

// streamOpened marks the own stream of gateway session id open; the SDK's
// client opens it again after it broke, so it may be marked more than
// once.
func (c *clientTasks) streamOpened(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stream(id):
	default:
		close(c.stream(id))
	}
}

// forget drops what c knows of the own stream of gateway session id once
// it ended, so a bridge that opens session after session keeps nothing of
// the ended ones.
func (c *clientTasks) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, id)
}

// awaitStream returns once the own stream of gateway session id is open,
// or after streamWait, when the stdio client declared the capability.
func (c *clientTasks) awaitStream(ctx context.Context, id string) {
	if c.caps.Load() == nil {
		return
	}
	c.mu.Lock()
	open := c.stream(id)
	c.mu.Unlock()
	t := time.NewTimer(streamWait)
	defer t.Stop()
	select {
	case <-open:
		return
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streams[id] == open {
		delete(c.streams, id) // no stream came: nothing waits for it now
	}
}

// cancelled reports whether params, of the gateway's cancellation on
// session, are about a request the stdio client is being asked, and
// withdraws it (the client is told so).
func (c *clientTasks) cancelled(session string, params json.RawMessage) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	c.mu.Lock()
	cancel, ok := c.asking[session+" "+string(p.RequestID)]
	c.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// answer has the stdio client answer msg, a request the gateway sent on
// session, and posts the answer to the gateway.
func (c *clientTasks) answer(ctx context.Context, session string, msg jsonrpcMessage) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
	res, err := c.ask(ctx, session, msg.Method, msg.Params)
	var je *jsonrpc.Error
	switch {
	case err != nil && ctx.Err() != nil:
		return // cancelled by the gateway, or its stream ended: no one waits
	case errors.As(err, &je):
		reply["error"] = je
	case err != nil:
		reply["error"] = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "idn: " + msg.Method + " was not answered"}
	default:
		reply["result"] = res
	}
	c.send(session, reply)
}

// send posts msg to the gateway on session, of the version that has
// tasks (the gateway relays them on no other).
func (c *clientTasks) send(session string, msg any) {
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
	post.Header.Set("Mcp-Session-Id", session)
	post.Header.Set("Mcp-Protocol-Version", mcptasks.Version)
	if resp, err := c.post.RoundTrip(post); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// ask relays a request of method with params raw, which the gateway sent
// on session, to the stdio client as a request of the bridge's own, and
// returns its answer as it wrote it. A task the client creates is bound
// to session; a request about any other task is answered
// mcptasks.NotFound without asking. When ctx ends first, the client is
// told the request is cancelled.
func (c *clientTasks) ask(ctx context.Context, session string, method string, raw json.RawMessage) (json.RawMessage, error) {
	caps := c.caps.Load()
	switch {
	case method == "tasks/list" && caps.List == nil, method == "tasks/cancel" && caps.Cancel == nil:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method " + method + " is not offered by this client"}
	case method == "tasks/get" || method == "tasks/result" || method == "tasks/cancel":
		var p struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(raw, &p) != nil || !c.tasks.Bound(p.TaskID, session) {
			return nil, mcptasks.NotFound
		}
	}
	id := clientTaskIDPrefix + strconv.FormatUint(c.next.Add(1), 10)
	answer, done := c.answers.Await(id)
	defer done()
	c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": raw})
	var in jsonrpcMessage
	select {
	case in = <-answer:
	case <-ctx.Done():
		c.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
			"params": map[string]string{"requestId": id, "reason": "the gateway's request was cancelled or ended"}})
		return nil, ctx.Err()
	}
	if in.Error != nil {
		return nil, in.Error
	}
	switch method {
	case "sampling/createMessage", "elicitation/create":
		if id, ok := mcptasks.Created(in.Result); ok {
			c.tasks.Bind(id, session)
		}
	case "tasks/list":
		list, err := c.tasks.List(in.Result, session)
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
