package mirror

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk's server and client both check an elicitation answer against
// the requested schema and fill in the schema's defaults: the relay would
// refuse answers the server accepts and send values the agent never gave.
// Answers carries the agent's answer past them, as it wrote it: the
// server's elicitation/create requests are noted as they are written
// (Watch), the answers to them taken out of the agent's POSTs (Take),
// and the SDK given an answer that names the one kept (Claim).

// maxAnswers bounds the requests and answers an agent session keeps: a
// request withdrawn before its answer leaves both behind, and at most
// hold.PerSession are asked at once.
const maxAnswers = 64

// answerKey is the _meta key of the answer the SDK is given in place of
// the agent's; its value is the request's id.
const answerKey = "idn/answer"

var elicitMethod = []byte(`"method":"elicitation/create"`)

// Answers keeps the agent's answers to the elicitations of one agent
// session. Its zero value is ready.
type Answers struct {
	mu      sync.Mutex
	asked   []string                   // ids of requests written, oldest first
	answers map[string]json.RawMessage // id → the agent's result, as written
	order   []string                   // answers' ids, oldest first
}

// Watch returns w noting the elicitation requests written through it:
// the SDK writes each event whole, in one Write.
func (a *Answers) Watch(w http.ResponseWriter) http.ResponseWriter {
	return &answersWriter{ResponseWriter: w, a: a}
}

// Take takes the agent's answer out of body, a POST of the agent, when it
// is a single response to a noted request: the answer is kept, and the
// body returned, for the SDK, answers with its id alone (see Claim).
// It reports false, and returns nothing, for anything else.
func (a *Answers) Take(body []byte) ([]byte, bool) {
	a.mu.Lock()
	waiting := len(a.asked) > 0
	a.mu.Unlock()
	if !waiting {
		return nil, false
	}
	var msg wire.Incoming
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) || json.Unmarshal(body, &msg) != nil ||
		msg.Method != "" || len(msg.Result) == 0 || msg.Error != nil {
		return nil, false
	}
	key, ok := wire.IDKey(msg.ID)
	if !ok || !a.settle(key, msg.Result) {
		return nil, false
	}
	stand, err := json.Marshal(wire.Response{JSONRPC: "2.0", ID: msg.ID, Result: map[string]any{"_meta": map[string]any{answerKey: key}}})
	return stand, err == nil
}

// Claim returns the agent's answer that res, what the SDK's server
// returned for an elicitation, stands for; false when res is the SDK's
// own reading of an answer that was not taken.
func (a *Answers) Claim(res *mcp.ElicitResult) (json.RawMessage, bool) {
	key, ok := res.Meta[answerKey].(string)
	if !ok || res.Action != "" {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	raw, ok := a.answers[key]
	delete(a.answers, key)
	return raw, ok
}

// note records the id of an elicitation request written.
func (a *Answers) note(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.asked) == maxAnswers {
		a.asked = a.asked[1:]
	}
	a.asked = append(a.asked, key)
}

// settle keeps raw as the answer to the noted request key and reports
// whether key was one.
func (a *Answers) settle(key string, raw json.RawMessage) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := -1
	for j, k := range a.asked {
		if k == key {
			i = j
		}
	}
	if i < 0 {
		return false
	}
	a.asked = append(a.asked[:i], a.asked[i+1:]...)
	if a.answers == nil {
		a.answers = map[string]json.RawMessage{}
	}
	if len(a.order) == maxAnswers {
		delete(a.answers, a.order[0])
		a.order = a.order[1:]
	}
	a.answers[key] = append(json.RawMessage(nil), raw...)
	a.order = append(a.order, key)
	return true
}

// answersWriter is an event stream's writer that notes the elicitation
// requests written.
type answersWriter struct {
	http.ResponseWriter
	a *Answers
}

func (w *answersWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, elicitMethod) {
		events := wire.NewEventReader(bufio.NewReader(bytes.NewReader(p)))
		if data, err := events.Next(); err == nil {
			var msg wire.Incoming
			if json.Unmarshal(data, &msg) == nil && msg.Method == "elicitation/create" {
				if key, ok := wire.IDKey(msg.ID); ok {
					w.a.note(key)
				}
			}
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *answersWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *answersWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
