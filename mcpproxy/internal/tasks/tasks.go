// Package tasks holds what the MCP endpoint keeps and reads of tasks (MCP
// 2025-11-25), which it relays as JSON past the go-sdk (package
// internal/mcptasks): each agent session's Book of the tasks it created,
// the params passed on for each tasks method, and the filtering of
// tasks/list and tools/list pages.
//
// Every task belongs to the agent session whose call created it: the
// tasks methods about any other id are answered NotFound without asking
// the server, and tasks/list pages keep only the session's own, so a
// server that keeps one store for all its sessions cannot be used to
// reach another agent's task. So do the notifications about it: a status
// notification reaches only the session that owns its task, and a
// progress notification only the session whose call its token was passed
// on with (a token the gateway mints, unguessable and unique, standing
// for the agent's own, which never goes upstream), from the call until
// its task ends.
package tasks

import (
	"crypto/rand"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxOwned bounds the task ids a session keeps: past it, the oldest is
// forgotten (and no longer reachable through the gateway).
const MaxOwned = 1024

// MaxEarly bounds the status notifications a session holds for tasks it
// does not own yet; past it, the oldest is dropped.
const MaxEarly = 32

// NotFound is the answer to a task id the session does not own, worded
// as the reference servers word an unknown one.
var NotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}

// Book is what an agent session knows of tasks: what its upstream session
// offers and the ids of the tasks it created.
type Book struct {
	offer atomic.Pointer[mcptasks.Offer]

	mu    sync.Mutex
	owned map[string]struct{}
	order []string // owned, oldest first
	// early are status notifications about tasks not (yet) owned: a
	// server may report a task before the answer that created it has
	// been read.
	early []early
	// tokens are the progress tokens of the session's task-augmented
	// calls, as passed on, each standing for the one the agent gave.
	tokens mcptasks.Tokens
}

type early struct {
	taskID string
	params json.RawMessage
}

// SetOffer records what the upstream session's initialize answer offered.
func (b *Book) SetOffer(o *mcptasks.Offer) { b.offer.Store(o) }

// Offered is the upstream's tasks capability; nil when it offers none.
func (b *Book) Offered() *mcptasks.Caps {
	if o := b.offer.Load(); o != nil {
		return o.Caps
	}
	return nil
}

// Relays reports whether tasks are relayed: the upstream session offers
// task-augmented tools/call in a version that has them and is at most
// newest, and the agent's session settled on agent (nil: not yet), a
// version that has them too.
func (b *Book) Relays(agent *string, newest string) bool {
	o := b.offer.Load()
	if o == nil || !o.Caps.Callable() || o.Version < mcptasks.Version || o.Version > newest {
		return false
	}
	return agent != nil && *agent >= mcptasks.Version
}

// Own makes task id the session's, created by a call passed on with
// progress token ("": none), and returns the status notifications about
// it that came before.
func (b *Book) Own(id, token string) []json.RawMessage {
	if token != "" {
		b.tokens.Created(passed(token), id)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.owned[id]; ok {
		return nil
	}
	if b.owned == nil {
		b.owned = map[string]struct{}{}
	}
	if len(b.order) >= MaxOwned {
		delete(b.owned, b.order[0])
		b.order = b.order[1:]
	}
	b.owned[id] = struct{}{}
	b.order = append(b.order, id)
	var out []json.RawMessage
	kept := b.early[:0]
	for _, e := range b.early {
		if e.taskID == id {
			out = append(out, e.params)
		} else {
			kept = append(kept, e)
		}
	}
	b.early = kept
	return out
}

// Owns reports whether task id is the session's.
func (b *Book) Owns(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.owned[id]
	return ok
}

// Hold keeps a status notification about task id, which the session does
// not own yet, and reports whether it dropped another to make room; held
// is false when the task is owned after all.
func (b *Book) Hold(id string, params json.RawMessage) (dropped, held bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.owned[id]; ok {
		return false, false
	}
	if len(b.early) >= MaxEarly {
		b.early, dropped = b.early[1:], true
	}
	b.early = append(b.early, early{id, params})
	return dropped, true
}

// Track returns the progress token a task-augmented call whose _meta is
// meta is passed on with, standing for the agent's; "" when the agent
// asked for no progress. Past mcptasks.MaxTokens tokens, the oldest is
// forgotten.
func (b *Book) Track(meta json.RawMessage) string {
	agent := mcptasks.ProgressToken(meta)
	if agent == nil {
		return ""
	}
	token := "idn-" + rand.Text()
	b.tokens.Track(passed(token), agent)
	return token
}

// passed is token, as Track made it, in JSON.
func passed(token string) json.RawMessage {
	raw, _ := json.Marshal(token)
	return raw
}

// Untrack forgets token when its call created no task: its progress
// ended with the call.
func (b *Book) Untrack(token string) {
	if token != "" {
		b.tokens.Untrack(passed(token))
	}
}

// Note returns the message the agent is sent for a notification of method
// (a task status or a progress notification) with params raw, secrets
// replaced; nil when none is sent now: a status held until its task is
// owned, or a notification that is not the session's, which dropped
// reports (and a held status dropped to make room). A status that ends a
// task ends its progress.
func (b *Book) Note(sc *scrub.Scrubber, method string, raw json.RawMessage) (msg []byte, dropped bool, err error) {
	if method == mcptasks.ProgressMethod {
		return b.progress(sc, raw)
	}
	id, ok := TaskID(raw)
	if !ok {
		return nil, false, nil
	}
	if !b.Owns(id) {
		var held bool
		if dropped, held = b.Hold(id, raw); held {
			return nil, dropped, nil
		}
	}
	b.tokens.Status(raw)
	msg, err = Status(sc, raw)
	return msg, dropped, err
}

// progress is Note of a progress notification: passed on under the
// agent's token when its token is one of the session's, its message
// scrubbed.
func (b *Book) progress(sc *scrub.Scrubber, raw json.RawMessage) ([]byte, bool, error) {
	msg, err := b.tokens.Progress(raw, sc.Replace)
	return msg, msg == nil && err == nil, err
}

// Forward returns the params a tasks method is passed on with (only the
// task it names, or the page of tasks/list), or the answer when it is
// not: a method the server does not offer, a task the session does not
// own.
func (b *Book) Forward(method string, p *mcptasks.Params) (map[string]string, error) {
	caps := b.Offered()
	if caps == nil || method == "tasks/list" && caps.List == nil || method == "tasks/cancel" && caps.Cancel == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpproxy: " + method + " is not offered on this connection"}
	}
	if p == nil {
		p = &mcptasks.Params{}
	}
	switch {
	case method == "tasks/list" && p.Cursor != "":
		return map[string]string{"cursor": p.Cursor}, nil
	case method == "tasks/list":
		return map[string]string{}, nil
	case !b.Owns(p.TaskID):
		return nil, NotFound
	}
	return map[string]string{"taskId": p.TaskID}, nil
}

// OwnList returns a tasks/list page with only the session's own tasks.
func (b *Book) OwnList(raw json.RawMessage) (json.RawMessage, error) {
	return mcptasks.KeepTasks(raw, b.Owns)
}

// TaskID is the taskId of a task or a status notification's params.
func TaskID(raw json.RawMessage) (string, bool) {
	var t struct {
		TaskID string `json:"taskId"`
	}
	return t.TaskID, json.Unmarshal(raw, &t) == nil && t.TaskID != ""
}

// Status is the status notification with params raw, secrets replaced,
// as the agent is sent it.
func Status(sc *scrub.Scrubber, raw json.RawMessage) ([]byte, error) {
	clean, err := scrub.Launder(sc, &raw)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcptasks.StatusMethod, "params": *clean})
}

// Spec is a call's task augmentation, as far as it is passed on.
type Spec struct {
	TTL *float64 `json:"ttl,omitempty"`
	// Token is the progress token the call is passed on with (Track); ""
	// when the agent asked for no progress.
	Token string `json:"-"`
}

// CallParams are the params of a task-augmented tools/call upstream.
type CallParams struct {
	Name      string            `json:"name"`
	Arguments json.RawMessage   `json:"arguments,omitempty"`
	Meta      map[string]string `json:"_meta,omitempty"`
	Task      Spec              `json:"task"`
}

// Call returns the params of a task-augmented call of tool.
func Call(tool string, args json.RawMessage, task Spec) CallParams {
	p := CallParams{Name: tool, Arguments: args, Task: task}
	if task.Token != "" {
		p.Meta = map[string]string{"progressToken": task.Token}
	}
	return p
}

// ToolsPage is a tools/list page as the server wrote it.
type ToolsPage struct {
	Tools []*mcp.Tool // decoded, for the checks
	Next  string      // its cursor
	page  map[string]json.RawMessage
	raw   []json.RawMessage // Tools as written
}

// ParseTools reads a tools/list page.
func ParseTools(raw json.RawMessage) (*ToolsPage, error) {
	p := &ToolsPage{}
	if err := json.Unmarshal(raw, &p.page); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(p.page["tools"], &p.raw); err != nil {
		return nil, err
	}
	p.Tools = make([]*mcp.Tool, len(p.raw))
	for i, t := range p.raw {
		p.Tools[i] = &mcp.Tool{}
		if err := json.Unmarshal(t, p.Tools[i]); err != nil {
			return nil, err
		}
	}
	_ = json.Unmarshal(p.page["nextCursor"], &p.Next)
	return p, nil
}

// Keep returns the page with only the tools keep keeps, each as written.
func (p *ToolsPage) Keep(keep func(*mcp.Tool) bool) (json.RawMessage, error) {
	kept := make([]json.RawMessage, 0, len(p.raw))
	for i, t := range p.Tools {
		if keep(t) {
			kept = append(kept, p.raw[i])
		}
	}
	var err error
	if p.page["tools"], err = json.Marshal(kept); err != nil {
		return nil, err
	}
	return json.Marshal(p.page)
}
