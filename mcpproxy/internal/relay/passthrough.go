package relay

import (
	"context"
	"encoding/json"

	"github.com/idnhq/idn/mcpproxy/internal/engine"
	"github.com/idnhq/idn/mcpproxy/internal/mirror"
	"github.com/idnhq/idn/mcpproxy/internal/rounds"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A stateless agent calling a stateless server: the server's rounds pass
// through. Its input_required result reaches the agent with its questions
// (scrubbed) and its requestState sealed to the caller, connection and
// tool; the agent's retry goes to the server with its answers and the
// server's state. The gateway holds nothing between rounds, and each
// round takes a call's checks, as the tools/call it is.

// errNoCall answers a retry whose requestState names no call the caller
// may continue here.
var errNoCall = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcpproxy: requestState names no call of this caller waiting on this gateway"}

// passes reports whether the server of s's lane speaks the stateless
// revision: its open upstream session says, else the connection's era.
// When neither is known yet (a replica's first call of the connection),
// the lane's session finds it first, so that the call's rounds are
// sealed, for any replica to continue, whenever the server allows.
func (l *lanes) passes(ctx context.Context, s *agentSession, conn *engine.Connection) bool {
	if l.e.eng.SDKUpstream {
		return false
	}
	cs := s.upstream.Session()
	if cs == nil {
		st, err := l.e.eng.State(conn)
		if err != nil {
			return false
		}
		if st.EraKnown() {
			return st.Stateless()
		}
		if cs, err = l.e.eng.Acquire(ctx, st, &s.upstream); err != nil {
			return false
		}
	}
	return cs.InitializeResult().ProtocolVersion >= wire.Revision
}

// passOwner binds a sealed state to who called which tool where.
func passOwner(s *agentSession, tool string) string {
	c := s.caller
	return s.connID + "\x00" + c.Namespace + "\x00" + c.Key + "\x00" + c.Subject + "\x00" + tool
}

// resumePassed answers a retry whose requestState is sealed: the server's
// state, when it opens for this caller and tool, goes up with answers.
func (l *lanes) resumePassed(ctx context.Context, s *agentSession, d declared, tool string, args json.RawMessage, sealed string, answers map[string]json.RawMessage) (mcp.Result, error) {
	state, ok := l.sealer.Open(passOwner(s, tool), sealed)
	if !ok {
		return nil, errNoCall
	}
	return l.pass(ctx, s, d, tool, args, &engine.CallRelay{Hold: s.hold, Caps: d}, &upstream.Rounds{Answers: answers, State: state})
}

// pass runs one round of a call on a stateless server and returns its
// result, or the server's next round for the agent.
func (l *lanes) pass(ctx context.Context, s *agentSession, d declared, tool string, args json.RawMessage, relay *engine.CallRelay, rs *upstream.Rounds) (mcp.Result, error) {
	relay.Pass = rs
	conn := s.conn.Load()
	res, err := l.e.call(ctx, s, conn, tool, args, nil, relay)
	if err != nil || rs.Asked == nil {
		if err != nil {
			return nil, err
		}
		return completed(res)
	}
	st, err := l.e.eng.State(conn)
	if err != nil {
		return nil, err
	}
	questions := make(map[string]rounds.Question, len(rs.Asked.Questions))
	for id, raw := range rs.Asked.Questions {
		clean, err := scrub.Launder(st.Scrubber.Load(), &raw)
		var q rounds.Question
		if err != nil || json.Unmarshal(*clean, &q) != nil {
			return nil, &engine.UpstreamError{ConnectionID: conn.ID, Message: "tools/call: an input request that cannot be checked for secrets"}
		}
		// As for a session: the agent is asked only what it declared.
		if !offered(d, q.Method) {
			return nil, mirror.NotOffered(q.Method)
		}
		questions[id] = q
	}
	return inputRequired(rounds.Outcome{Questions: questions, State: l.sealer.Seal(passOwner(s, tool), rs.Asked.State)})
}

// offered reports whether an agent that declared d answers method.
func offered(d declared, method string) bool {
	return method == "elicitation/create" && d.Elicitation != nil ||
		method == "sampling/createMessage" && d.Sampling != nil ||
		method == "roots/list" && d.Roots != nil
}
