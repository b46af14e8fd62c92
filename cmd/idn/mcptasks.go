package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks through idn mcp. The go-sdk has no model of tasks on either side
// (see package mcptasks). So the bridge carries them as JSON where the
// gateway session offers them.
//
// The gateway's tasks capability is read off its initialize answer and
// passed on in the answer to the stdio client. tools/list is relayed as
// the gateway wrote it, each tool's execution included. The tasks methods
// are custom methods on both sides.
//
// The SDK's server would run a task-augmented tools/call as a plain call.
// So the bridge takes such a call off stdin before the SDK reads it and
// sends it to the gateway as it came.
//
// The gateway's task status notifications are written to stdout between
// the SDK's messages. So is a task's progress under the token the stdio
// client gave its call, from the call until a status ends the task. It is
// written as the gateway relays it, in the order the gateway sent it. The
// SDK's client would not keep that order: it could hand progress to its
// handler after the tap (mcptasks.Tap) wrote a status read later. And a
// client forgets a task's token when the task ends.
//
// The gateway binds every task to the session that created it. That
// session serves this one stdio client.

// relaysTasks reports whether the gateway session offers task-augmented
// tools/call, in a version that has them, to a stdio client of one too.
func (b *bridge) relaysTasks() bool {
	o := b.tasks.Load()
	b.mu.Lock()
	version := b.version
	b.mu.Unlock()
	return o != nil && o.Caps.Callable() && o.Version >= mcptasks.Version && version >= mcptasks.Version
}

// addTaskMethods registers the tasks methods on the stdio server.
func (b *bridge) addTaskMethods(server *mcp.Server) {
	for _, method := range mcptasks.Methods {
		_ = mcp.AddReceivingCustomMethod(server, method, func(ctx context.Context, _ *mcp.ServerSession, p *mcptasks.Params) (*mcptasks.Result, error) {
			if !b.relaysTasks() {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "idn: " + method + " is not offered by the gateway"}
			}
			res, err := b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) {
				return mcp.CallCustomMethod[*mcptasks.Params, *mcptasks.Result](ctx, cs, method, p)
			}, method != "tasks/cancel")
			if err != nil {
				return nil, err
			}
			return res.(*mcptasks.Result), nil
		})
	}
}

// status writes a task status notification of the gateway to the stdio
// client; one that ends a task ends its progress.
func (b *bridge) status(params json.RawMessage) {
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcptasks.StatusMethod, "params": params})
	if err == nil {
		_, _ = b.out.Write(append(msg, '\n'))
	}
	b.taskTokens.Status(params)
}

// taskProgress writes a progress notification of the gateway to the stdio
// client when it is under the token of one of the client's task-augmented
// calls whose task runs.
func (b *bridge) taskProgress(params json.RawMessage) {
	if msg, err := b.taskTokens.Progress(params, nil); err == nil && msg != nil {
		_, _ = b.out.Write(append(msg, '\n'))
	}
}

// rawRequest sends one request of method on the gateway session as JSON
// and returns its answer's result, or its error as a *jsonrpc.Error, as
// the gateway wrote it.
func (b *bridge) rawRequest(ctx context.Context, cs *mcp.ClientSession, id json.RawMessage, method string, params json.RawMessage) (json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", method, mcp.ErrSessionMissing)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: the gateway answered %s", method, resp.Status)
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" {
		err = json.NewDecoder(resp.Body).Decode(&msg)
	} else {
		err = answerIn(resp.Body, string(id), &msg)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", method, err)
	case msg.Error != nil:
		return nil, msg.Error
	}
	return msg.Result, nil
}

// answerIn reads an event stream up to the answer to the request id into
// msg; what else it carries the stdio client is told by other means.
func answerIn(r io.Reader, id string, msg any) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(data), &m) == nil && m.Method == "" && string(m.ID) == id {
			return json.Unmarshal([]byte(data), msg)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the gateway's event stream ended before the answer")
}

// listTools answers tools/list with the gateway's page as it wrote it.
func (b *bridge) listTools(ctx context.Context, params *mcp.ListToolsParams) (mcp.Result, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) {
		res, err := b.rawRequest(ctx, cs, json.RawMessage(`"idn-tools-list"`), "tools/list", raw)
		if err != nil {
			return nil, err
		}
		return &mcptasks.Result{Raw: res}, nil
	}, true)
}

// taskCalls is the stdio client's input with its task-augmented
// tools/call taken out, each handed to call.
type taskCalls struct {
	r    *bufio.Reader
	rest []byte // of the line being read
	take func(line []byte) bool
}

func (t *taskCalls) Read(p []byte) (int, error) {
	for len(t.rest) == 0 {
		line, err := t.r.ReadBytes('\n')
		if len(line) > 0 && !t.take(line) {
			t.rest = line
		}
		if err != nil && len(t.rest) == 0 {
			return 0, err
		}
	}
	n := copy(p, t.rest)
	t.rest = t.rest[n:]
	return n, nil
}

// taskCall takes line when it is a task-augmented tools/call the gateway
// session relays, and answers it on stdout once the gateway did.
func (b *bridge) taskCall(ctx context.Context, wg *sync.WaitGroup, line []byte) bool {
	if !bytes.Contains(line, []byte(`"task"`)) || !b.relaysTasks() {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	var params struct {
		Task json.RawMessage `json:"task"`
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.Method != "tools/call" || msg.ID == nil ||
		json.Unmarshal(msg.Params, &params) != nil || len(params.Task) == 0 || params.Task[0] != '{' {
		return false
	}
	// Its progress is the client's from now: the gateway may relay some
	// before its answer.
	token := mcptasks.ProgressToken(params.Meta)
	if token != nil {
		b.taskTokens.Track(token, token)
	}
	wg.Go(func() {
		answer := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		var raw json.RawMessage
		res, err := b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) {
			var err error
			if raw, err = b.rawRequest(ctx, cs, msg.ID, "tools/call", msg.Params); err != nil {
				return nil, err
			}
			return &mcptasks.Result{Raw: raw}, nil
		}, false)
		if token != nil {
			if id, ok := mcptasks.Created(raw); ok && err == nil {
				b.taskTokens.Created(token, id)
			} else {
				b.taskTokens.Untrack(token)
			}
		}
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			answer["error"] = je
		case err != nil:
			answer["error"] = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		default:
			answer["result"] = res
		}
		if out, err := json.Marshal(answer); err == nil {
			_, _ = b.out.Write(append(out, '\n'))
		}
	})
	return true
}

// lockedWriter writes each message to stdout whole: the SDK's server
// writes one message per Write, and the bridge writes its own between.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }
