package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server of the stateless revision (MCP 2026-07-28) keeps no session:
// each request carries the protocol version and the client's capabilities
// in its _meta, and its method and tool in headers. A server that needs
// the client's input during a call does not send requests on the call's
// stream: it answers input_required with its questions and a
// requestState, and the client calls again with the answers. CallStateless
// runs those rounds itself, each question answered through the Handler as
// a session's server request is, so the agent behind the relay is asked
// whatever its own revision; or, for an agent of the stateless revision,
// hands each round to its caller (Rounds), so that nothing is held.

// maxRounds bounds the rounds of one call, as the SDK's client does.
const maxRounds = 10

// inputRequest is one question of an input_required result.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// roundHead is what a result says of its round.
type roundHead struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]inputRequest `json:"inputRequests"`
	RequestState  string                  `json:"requestState"`
}

// callParams are a tools/call's params as the relay sends them: the
// answers go as the agent wrote them.
type callParams struct {
	Meta           mcp.Meta                   `json:"_meta,omitempty"`
	Name           string                     `json:"name"`
	Arguments      any                        `json:"arguments,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	RequestState   string                     `json:"requestState,omitempty"`
}

// Rounds carries a call's rounds to and from its caller instead of
// answering them: Answers and State (the agent's retry) go with the
// first request, and a round the server asks for comes back in Asked.
type Rounds struct {
	Answers map[string]json.RawMessage
	State   string
	Asked   *Round
}

// Round is an input_required result: the server's questions, each a
// {"method","params"} object as the server wrote it, and its state.
type Round struct {
	Questions map[string]json.RawMessage
	State     string
}

// StatelessMeta is the _meta every request of the stateless revision
// carries: its version, the client and what the client declares.
func StatelessMeta(info *mcp.Implementation, capabilities any) mcp.Meta {
	return mcp.Meta{
		"io.modelcontextprotocol/protocolVersion":    wire.Revision,
		"io.modelcontextprotocol/clientInfo":         info,
		"io.modelcontextprotocol/clientCapabilities": capabilities,
	}
}

// CallStateless sends params as the tools/call id to the stateless server
// of s, whose _meta it carries (StatelessMeta). It returns the call's
// result, answering the server's questions through h round by round.
// schema is the tool's input schema, for the argument headers it asks
// for. The result is as the server wrote it. With pass set, a round the
// server asks for ends the call: its result is empty ({}) and the round
// is in pass.Asked. Errors are those of Request.
func CallStateless(ctx context.Context, s Session, id string, params *mcp.CallToolParams, schema json.RawMessage, h Handler, pass *Rounds, detach func(func())) (json.RawMessage, error) {
	s.ID = ""
	s.Header = http.Header{"Mcp-Name": {params.Name}}
	args, _ := params.Arguments.(json.RawMessage)
	for k, v := range ParamHeaders(schema, args) {
		s.Header.Set(k, v)
	}
	p := callParams{Meta: mcp.Meta{}, Name: params.Name, Arguments: params.Arguments}
	maps.Copy(p.Meta, s.Meta)
	maps.Copy(p.Meta, params.Meta)
	if pass != nil {
		p.InputResponses, p.RequestState = pass.Answers, pass.State
	}
	named := renamed{h, id}
	for round := 1; ; round++ {
		rid := id
		if round > 1 {
			rid += "." + strconv.Itoa(round)
		}
		raw, err := Request(ctx, s, rid, "tools/call", &p, named, detach)
		if err != nil {
			return nil, err
		}
		var head roundHead
		if mayAsk(raw) {
			if err := json.Unmarshal(raw, &head); err != nil {
				return nil, fmt.Errorf("tools/call: unreadable result: %w", err)
			}
		}
		if head.ResultType == "input_required" && pass != nil {
			var asked struct {
				Questions map[string]json.RawMessage `json:"inputRequests"`
			}
			if err := json.Unmarshal(raw, &asked); err != nil {
				return nil, fmt.Errorf("tools/call: unreadable result: %w", err)
			}
			pass.Asked = &Round{Questions: asked.Questions, State: head.RequestState}
			return json.RawMessage(`{}`), nil
		}
		if head.ResultType != "input_required" {
			return raw, nil
		}
		if round == maxRounds {
			return nil, fmt.Errorf("tools/call: the upstream asked for input %d times", maxRounds)
		}
		if p.InputResponses, err = answerRound(ctx, h, head.InputRequests); err != nil {
			return nil, err
		}
		p.RequestState = head.RequestState
	}
}

// mayAsk reports whether a result may be a round: one that spells
// input_required nowhere, not even with escapes, is complete, and is
// returned without being read.
func mayAsk(raw []byte) bool {
	return bytes.Contains(raw, []byte("input_required")) || bytes.Contains(raw, []byte(`\u`))
}

// answerRound has h answer a round's questions, at once, each as a
// request of the server named by its key.
func answerRound(ctx context.Context, h Handler, questions map[string]inputRequest) (map[string]json.RawMessage, error) {
	answers := make(map[string]json.RawMessage, len(questions))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for key, q := range questions {
		leave, ok := h.Enter()
		if !ok {
			mu.Lock()
			errs = append(errs, errors.New("tools/call: the upstream asked more questions at once than the gateway answers"))
			mu.Unlock()
			break
		}
		id, _ := json.Marshal(key)
		wg.Go(func() {
			defer leave()
			reply := h.Answer(ctx, wire.Incoming{JSONRPC: "2.0", ID: id, Method: q.Method, Params: q.Params})
			var raw json.RawMessage
			var err error
			if reply.Error != nil {
				err = reply.Error
			} else {
				raw, err = json.Marshal(reply.Result)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// A refusal has no place in the answers: the call
				// fails with it.
				errs = append(errs, fmt.Errorf("tools/call: the answer to %s: %w", q.Method, err))
				return
			}
			answers[key] = raw
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return answers, nil
}

// renamed tells the notifications of every round's stream as those of
// the call's first request, whose id its progress token is.
type renamed struct {
	Handler
	id string
}

func (r renamed) Notify(_ string, msg wire.Incoming) { r.Handler.Notify(r.id, msg) }
