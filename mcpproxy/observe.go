package mcpproxy

import (
	"context"
	"net/http"
	"time"
)

// UpstreamExchange is one HTTP exchange with an upstream MCP server (each
// attempt of a retried one), as Config.OnUpstream is told of it.
type UpstreamExchange struct {
	ConnectionID string
	// Method is the HTTP method: POST for JSON-RPC messages, GET for the
	// session's event stream, DELETE when a session ends.
	Method string
	// Status is the response's status; 0 when none came (Err is set).
	Status int
	// Err is the transport failure, unscrubbed: it is for classifying,
	// never for logging as is.
	Err error
	// Elapsed is the time to the response headers or the failure.
	Elapsed time.Duration
}

// Event is one MCP decision of the proxy about a caller's request: a
// tool listing (Method "tools/list"), a tool call ("tools/call", task
// augmented or not), a tasks method ("tasks/get", "tasks/result",
// "tasks/list", "tasks/cancel", an agent's or, for the agent's own tasks,
// a server's, with a server's task-augmented "sampling/createMessage" and
// "elicitation/create") or a task status notification
// ("notifications/tasks/status"), with its outcome, for Config.OnDecision.
type Event struct {
	ConnectionID string
	Caller       Caller
	Method       string
	Tool         string // for tools/call
	// Outcome is the result as idn_gateway_mcp_tool_call_total counts it
	// for calls (success, tool_error, error, filtered, tool_changed, not_found,
	// invalid_arguments, rate_limited, circuit_open, task_created);
	// "success" or "error" for listings; "success", "error" or
	// "not_owned" (a task of another session, or none) for the tasks
	// methods; "relayed", "no_stream" (kept for a resumed stream) or
	// "not_owned" for status and task progress notifications; also
	// "not_offered" for a server's tasks request.
	Outcome string
	// Code is the stable error code of a refusal or failure.
	Code string
}

// observe tells Config.OnUpstream of one exchange, when set.
func (p *Proxy) observe(ctx context.Context, connID string, req *http.Request, resp *http.Response, err error, start time.Time) {
	if p.onUpstream == nil {
		return
	}
	e := UpstreamExchange{ConnectionID: connID, Method: req.Method, Err: err, Elapsed: time.Since(start)}
	if resp != nil {
		e.Status = resp.StatusCode
	}
	p.onUpstream(ctx, e)
}

// decide tells Config.OnDecision of one decision, when set.
func (p *Proxy) decide(ctx context.Context, conn *Connection, caller Caller, method, tool, outcome string, err error) {
	if p.onDecision == nil {
		return
	}
	e := Event{ConnectionID: conn.ID, Caller: caller, Method: method, Tool: tool, Outcome: outcome}
	if err != nil {
		e.Code = toAPIError(err).Code().String()
	}
	p.onDecision(ctx, e)
}

// outcome is the Outcome of a listing that ended with err.
func outcome(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
