package mcptasks

import (
	"encoding/json"
	"sync"
)

// MaxTokens bounds the progress tokens a Tokens keeps: past it, the
// oldest is forgotten (and its progress no longer relayed).
const MaxTokens = 1024

// Tokens are the progress tokens of a session's task-augmented calls,
// each as it is passed on to the server and as the client gave it, from
// the call until a status notification ends the task it created, or the
// call ends when it created none. Progress under any other token is not
// the client's: the gateway's MCP endpoint passes each call on with a
// token of its own, and idn mcp with the client's.
type Tokens struct {
	mu    sync.Mutex
	by    map[string]*progressToken // by the passed token, as key makes it
	order []string                  // keys of by, oldest first
}

type progressToken struct {
	client json.RawMessage // the client's token, as it sent it
	task   string          // the task the call created; "" before
}

// ProgressToken is the progress token in meta, a request's _meta; nil
// when it has none that MCP allows (a string or an integer).
func ProgressToken(meta json.RawMessage) json.RawMessage {
	var m struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(meta, &m) != nil || m.ProgressToken == nil {
		return nil
	}
	var v any
	if json.Unmarshal(m.ProgressToken, &v) != nil {
		return nil
	}
	switch v := v.(type) {
	case string:
		return m.ProgressToken
	case float64:
		if v == float64(int64(v)) {
			return m.ProgressToken
		}
	}
	return nil
}

// key is token in one spelling: the same token written with other
// escapes or another number format is the same key.
func key(token json.RawMessage) string {
	var v any
	if json.Unmarshal(token, &v) != nil {
		return ""
	}
	k, _ := json.Marshal(v)
	return string(k)
}

// Track starts relaying the progress under passed, a call's token as
// passed on, as progress under client, the token the client gave it.
func (t *Tokens) Track(passed, client json.RawMessage) {
	k := key(passed)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]*progressToken{}
	}
	if _, ok := t.by[k]; ok {
		t.forget(k)
	}
	if len(t.order) >= MaxTokens {
		delete(t.by, t.order[0])
		t.order = t.order[1:]
	}
	t.by[k] = &progressToken{client: client}
	t.order = append(t.order, k)
}

// Created binds passed to task, the task its call created: its progress
// is relayed until a status notification ends the task.
func (t *Tokens) Created(passed json.RawMessage, task string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.by[key(passed)]; p != nil {
		p.task = task
	}
}

// Untrack forgets passed when its call created no task: its progress
// ended with the call.
func (t *Tokens) Untrack(passed json.RawMessage) {
	k := key(passed)
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.by[k]; p != nil && p.task == "" {
		t.forget(k)
	}
}

// Status forgets the tokens of the task a status notification with
// params raw is about, when it says the task ended (completed, failed,
// cancelled).
func (t *Tokens) Status(raw json.RawMessage) {
	var st struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if json.Unmarshal(raw, &st) != nil || st.TaskID == "" || st.Status != "completed" && st.Status != "failed" && st.Status != "cancelled" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, p := range t.by {
		if p.task == st.TaskID {
			t.forget(k)
		}
	}
}

// Tracks reports whether passed is a token whose progress is relayed.
func (t *Tokens) Tracks(passed json.RawMessage) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.by[key(passed)] != nil
}

// forget drops the token of key k; t.mu is held.
func (t *Tokens) forget(k string) {
	delete(t.by, k)
	for i, o := range t.order {
		if o == k {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

// Progress returns the progress notification the client is sent for one
// with params raw: under the client's token, with only the progress,
// total and message (replace rewrites the message; nil: as it came), not
// the server's _meta; nil when its token is not one of t's.
func (t *Tokens) Progress(raw json.RawMessage, replace func(string) string) ([]byte, error) {
	var p struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      float64         `json:"progress"`
		Total         *float64        `json:"total"`
		Message       string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	t.mu.Lock()
	tok := t.by[key(p.ProgressToken)]
	t.mu.Unlock()
	if tok == nil {
		return nil, nil
	}
	if replace != nil {
		p.Message = replace(p.Message)
	}
	return json.Marshal(map[string]any{"jsonrpc": "2.0", "method": ProgressMethod, "params": struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      float64         `json:"progress"`
		Total         *float64        `json:"total,omitempty"`
		Message       string          `json:"message,omitempty"`
	}{tok.client, p.Progress, p.Total, p.Message}})
}
