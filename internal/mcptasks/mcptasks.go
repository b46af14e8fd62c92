// Package mcptasks carries MCP tasks (protocol version 2025-11-25) past
// the go-sdk, for the gateway's MCP endpoint and the idn mcp bridge. The
// SDK has no model of tasks. Its client drops a server's tasks capability
// and the task status notifications a server sends, and its server cannot
// write either. So this package fills the gaps:
//
//   - Tap reads them off the HTTP exchanges of the SDK's client;
//   - Result and Params carry the tasks methods' JSON as custom methods of
//     the SDK;
//   - WithTasks adds the capability to an initialize answer;
//   - Tokens decide whose a task's progress is.
//
// The client side of tasks, which a client runs for the server, is carried
// by the parts in client.go.
package mcptasks

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the protocol version that introduced tasks.
const Version = "2025-11-25"

// StatusMethod is the task status notification.
const StatusMethod = "notifications/tasks/status"

// ProgressMethod is the progress notification, which a server sends for a
// task-augmented request on any of its session's streams, as long as the
// task runs.
const ProgressMethod = "notifications/progress"

// Methods are the tasks methods a client sends a server.
var Methods = []string{"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"}

// maxEventBytes bounds one event of an event stream, as the SDK's client
// does by default.
const maxEventBytes = 16 << 20

// Caps is the part of a server's tasks capability that is relayed; nil
// fields were not advertised.
type Caps struct {
	List     json.RawMessage `json:"list,omitempty"`
	Cancel   json.RawMessage `json:"cancel,omitempty"`
	Requests *struct {
		Tools *struct {
			Call json.RawMessage `json:"call,omitempty"`
		} `json:"tools,omitempty"`
	} `json:"requests,omitempty"`
}

// Callable reports whether c offers task-augmented tools/call.
func (c *Caps) Callable() bool {
	return c != nil && c.Requests != nil && c.Requests.Tools != nil && c.Requests.Tools.Call != nil
}

// Relayed is what a client is told of c: list and cancel as the server
// offered them, and task-augmented tools/call. It is nil when the server
// offers no task-augmented tools/call. The tasks of other requests, and
// any future part, are not relayed.
func (c *Caps) Relayed() map[string]any {
	if !c.Callable() {
		return nil
	}
	out := map[string]any{"requests": map[string]any{"tools": map[string]any{"call": c.Requests.Tools.Call}}}
	if c.List != nil {
		out["list"] = c.List
	}
	if c.Cancel != nil {
		out["cancel"] = c.Cancel
	}
	return out
}

// Offer is what a server's initialize answer said of tasks: its tasks
// capability (nil: none) and the protocol version it settled on.
type Offer struct {
	Caps    *Caps
	Version string
}

// Result is a result passed on as the JSON the SDK's types cannot hold.
type Result struct {
	mcp.ResultBase
	Raw json.RawMessage
}

func (r *Result) MarshalJSON() ([]byte, error) { return r.Raw, nil }

func (r *Result) UnmarshalJSON(b []byte) error {
	r.Raw = append(r.Raw[:0], b...)
	return nil
}

// Params are the params of a tasks method, as far as they are passed on.
type Params struct {
	mcp.ParamsBase
	TaskID string `json:"taskId,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// Created returns the id of the task a task-augmented call's result raw
// created; false when the server ran the call as a plain one.
func Created(raw json.RawMessage) (string, bool) {
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	return created.Task.TaskID, json.Unmarshal(raw, &created) == nil && created.Task.TaskID != ""
}

// KeepTasks returns the tasks/list result raw with only the tasks whose
// id keep accepts, its other members (the cursor) as they were.
func KeepTasks(raw json.RawMessage, keep func(taskID string) bool) (json.RawMessage, error) {
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
		if json.Unmarshal(t, &task) == nil && task.TaskID != "" && keep(task.TaskID) {
			kept = append(kept, t)
		}
	}
	var err error
	if page["tasks"], err = json.Marshal(kept); err != nil {
		return nil, err
	}
	return json.Marshal(page)
}

// WithTasks is the initialize answer ir with the tasks capability caps.
func WithTasks(ir *mcp.InitializeResult, caps map[string]any) (mcp.Result, error) {
	raw, err := json.Marshal(ir)
	if err != nil {
		return nil, err
	}
	var res map[string]any
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	c, _ := res["capabilities"].(map[string]any)
	if c == nil {
		c = map[string]any{}
		res["capabilities"] = c
	}
	c["tasks"] = caps
	if raw, err = json.Marshal(res); err != nil {
		return nil, err
	}
	return &Result{Raw: raw}, nil
}

// Tap is the transport under an SDK client's session. It reads the
// server's answer to initialize (the one POST without a session id) for
// its tasks capability. It reads every other event stream for task status
// notifications and progress notifications, as the client reads them:
// the session's own, GET, and those answering the client's requests. The
// client gets every byte as it came.
type Tap struct {
	Base http.RoundTripper // nil: http.DefaultTransport
	// Offer is told what each initialize answer offers.
	Offer func(*Offer)
	// Status is told the params of each task status notification.
	Status func(json.RawMessage)
	// Progress is told the params of each progress notification.
	Progress func(json.RawMessage)
}

// Tapped returns hc with its transport under a Tap telling offer what
// the server offers, and note each task status and progress notification
// by method.
func Tapped(hc *http.Client, offer func(*Offer), note func(method string, params json.RawMessage)) *http.Client {
	tap := &Tap{Base: hc.Transport, Offer: offer,
		Status:   func(p json.RawMessage) { note(StatusMethod, p) },
		Progress: func(p json.RawMessage) { note(ProgressMethod, p) },
	}
	return &http.Client{Transport: tap, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar, Timeout: hc.Timeout}
}

func (t *Tap) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	initialize := req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == ""
	switch {
	case initialize && mt == "text/event-stream":
		resp.Body = &events{ReadCloser: resp.Body, event: t.initialized}
	case mt == "text/event-stream" && (t.Status != nil || t.Progress != nil):
		resp.Body = &events{ReadCloser: resp.Body, event: t.note}
	case initialize && mt == "application/json":
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxEventBytes))
		if err == nil {
			t.initialized(raw)
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(raw), resp.Body), resp.Body}
	}
	return resp, nil
}

// initialized tells Offer of the tasks capability in data when it is a
// result.
func (t *Tap) initialized(data []byte) {
	var msg struct {
		Result *struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Tasks *Caps `json:"tasks"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	if t.Offer != nil && json.Unmarshal(data, &msg) == nil && msg.Result != nil {
		t.Offer(&Offer{Caps: msg.Result.Capabilities.Tasks, Version: msg.Result.ProtocolVersion})
	}
}

// note tells Status of data when it is a task status notification, and
// Progress when it is a progress notification.
func (t *Tap) note(data []byte) {
	if !bytes.Contains(data, []byte(`"notifications/`)) {
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.ID != nil {
		return
	}
	switch {
	case msg.Method == StatusMethod && t.Status != nil:
		t.Status(msg.Params)
	case msg.Method == ProgressMethod && t.Progress != nil:
		t.Progress(msg.Params)
	}
}

// events reads an event stream as its reader reads it, handing the data
// of each event to event.
type events struct {
	io.ReadCloser
	event func(data []byte)
	line  []byte // the line being read
	data  []byte // the data of the event being read
}

func (e *events) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			if len(e.line) < maxEventBytes {
				e.line = append(e.line, b)
			}
			continue
		}
		line := bytes.TrimSuffix(e.line, []byte("\r"))
		switch {
		case len(line) == 0 && len(e.data) > 0:
			e.event(e.data)
			e.data = e.data[:0]
		case bytes.HasPrefix(line, []byte("data:")) && len(e.data)+len(line) <= maxEventBytes:
			if len(e.data) > 0 {
				e.data = append(e.data, '\n')
			}
			e.data = append(e.data, bytes.TrimPrefix(line[len("data:"):], []byte(" "))...)
		}
		e.line = e.line[:0]
	}
	return n, err
}
