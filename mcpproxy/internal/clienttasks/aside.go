package clienttasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK's client reads the upstream session's own event stream, and the
// streams of the requests it sends: a server's request of the client side
// of tasks there would be answered without its task, or "method not
// found". Those requests are taken out of the stream before the SDK reads
// it, and answered by the relay.

// Asker relays a server's request of method with params to the agent and
// returns its answer (the endpoint's ask).
type Asker func(ctx context.Context, method string, params json.RawMessage) (any, error)

// aside is an event stream the SDK's client reads, minus the events
// divert takes.
type aside struct {
	body    io.ReadCloser
	lines   *bufio.Reader
	divert  func(data []byte) bool
	event   []byte // the event being read
	pending []byte // what is passed on next
	err     error  // the body's, returned once pending is read
}

func (a *aside) Close() error { return a.body.Close() }

func (a *aside) Read(p []byte) (int, error) {
	for len(a.pending) == 0 && a.err == nil {
		line, err := a.lines.ReadBytes('\n')
		a.event = append(a.event, line...)
		switch {
		case err != nil:
			a.pending, a.event, a.err = a.event, nil, err
		case len(bytes.TrimRight(line, "\r\n")) == 0:
			if !a.divert(data(a.event)) {
				a.pending = a.event
			}
			a.event = nil
		}
	}
	n := copy(p, a.pending)
	a.pending = a.pending[n:]
	if len(a.pending) == 0 && a.err != nil {
		return n, a.err
	}
	return n, nil
}

// data is the data of an event.
func data(event []byte) []byte {
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

// taken reports whether the message msg is a request the relay answers
// instead of the SDK's client: a tasks request, or a sampling or
// elicitation asked for as a task that caps lets the server send.
func taken(caps *Caps, msg wire.Incoming) bool {
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

// answer has ask answer msg, a request read from the stream of req, and
// posts the answer to the server with base: in ctx carrying its upstream
// session, ending with that stream or after timeout.
func answer(req *http.Request, base http.RoundTripper, timeout time.Duration, ask Asker, msg wire.Incoming) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	defer context.AfterFunc(req.Context(), cancel)()
	up := Upstream{ID: req.Header.Get("Mcp-Session-Id"), Version: req.Header.Get("Mcp-Protocol-Version")}
	reply := wire.Response{JSONRPC: "2.0", ID: msg.ID}
	res, err := ask(WithUpstream(ctx, up), msg.Method, msg.Params)
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpproxy: " + msg.Method + " was not answered"}
		}
		reply.Error = je
	} else {
		reply.Result = res
	}
	body, err := json.Marshal(reply)
	if err != nil {
		return
	}
	post, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, req.URL.String(), bytes.NewReader(body))
	if err != nil {
		return
	}
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Accept", "application/json, text/event-stream")
	post.Header.Set("Mcp-Session-Id", up.ID)
	post.Header.Set("Mcp-Protocol-Version", up.Version)
	if resp, err := base.RoundTrip(post); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
