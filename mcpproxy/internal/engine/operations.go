package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/internal/catalog"

	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/kit/tracing"
	"github.com/idnhq/idn/mcpproxy/internal/arguments"
	"github.com/idnhq/idn/mcpproxy/internal/metrics"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/tasks"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// ServerInfo is the upstream server's metadata from its initialize answer.
type ServerInfo struct {
	Name            string `json:"name"`
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocol_version"`
}

// ToolList is the answer of GET /mcp/{id}/tools: the tools the subject may
// use, the server metadata and when discovery last succeeded.
type ToolList struct {
	ConnectionID string     `json:"connection_id"`
	Server       ServerInfo `json:"server"`
	Tools        []Tool     `json:"tools"`
	DiscoveredAt time.Time  `json:"discovered_at"`
}

// CallResult is the answer of POST /mcp/{id}/tools/{tool}/call. IsError
// reports that the tool ran and failed; it is still a 200.
type CallResult struct {
	ConnectionID      string        `json:"connection_id"`
	Tool              string        `json:"tool"`
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structured_content,omitempty"`
	IsError           bool          `json:"is_error"`
	// meta is the result's _meta, which the MCP endpoint passes on.
	meta mcp.Meta
	// task is the server's answer to a task-augmented call, its task,
	// scrubbed; the fields above are then unset.
	task json.RawMessage
	// raw is the result as the server wrote it, scrubbed, when the call
	// asked to keep it (SessionCall.Raw); only IsError is set beside it.
	raw json.RawMessage
}

// Raw is the result as the server wrote it, scrubbed, for a call made
// with SessionCall.Raw; nil otherwise.
func (r *CallResult) Raw() json.RawMessage { return r.raw }

// Meta is the result's _meta, which the MCP endpoint passes on.
func (r *CallResult) Meta() mcp.Meta { return r.meta }

// Task is the server's answer to a task-augmented call: the task it
// created, scrubbed. Nil for a plain call.
func (r *CallResult) Task() json.RawMessage { return r.task }

// lookup returns the connection's state and its discovery per refresh.
func (p *Engine) lookup(ctx context.Context, conn *Connection, refresh Refresh) (*Conn, *catalog.Catalog, error) {
	st, err := p.State(conn)
	if err != nil {
		return nil, nil, err
	}
	snap, err := p.discover(ctx, st, refresh)
	return st, snap, err
}

// Discover returns the connection's full, unfiltered discovery, for the
// admin discover route (whose default is RefreshForce).
func (p *Engine) Discover(ctx context.Context, conn *Connection, refresh Refresh) (Discovery, error) {
	_, snap, err := p.lookup(ctx, conn, refresh)
	if err != nil {
		return Discovery{}, err
	}
	d := snap.Discovery
	d.Tools = append([]Tool{}, snap.Discovery.Tools...)
	return d, nil
}

// Tools returns the tools subject may see on conn.
func (p *Engine) Tools(ctx context.Context, conn *Connection, subject string, refresh Refresh) (*ToolList, error) {
	ctx = withSubject(ctx, subject)
	_, snap, err := p.lookup(ctx, conn, refresh)
	if err != nil {
		return nil, err
	}
	pinned := p.Pins.Pinned(conn.ID, snap)
	tools := []Tool{}
	for _, name := range conn.Policy.Filter(subject, snap.Names) {
		if pinned(name) {
			tools = append(tools, snap.Tool(name))
		}
	}
	return &ToolList{
		ConnectionID: conn.ID,
		Server:       ServerInfo{Name: snap.Discovery.ServerName, Version: snap.Discovery.ServerVersion, ProtocolVersion: snap.Discovery.ProtocolVersion},
		Tools:        tools,
		DiscoveredAt: snap.Discovery.DiscoveredAt,
	}, nil
}

// Explain says whether subject may use tool on conn, and which rule
// decided. A tool the server did not list is ErrToolNotFound.
func (p *Engine) Explain(ctx context.Context, conn *Connection, subject, tool string, refresh Refresh) (Decision, error) {
	ctx = withSubject(ctx, subject)
	_, snap, err := p.lookup(ctx, conn, refresh)
	if err != nil {
		return Decision{}, err
	}
	if !snap.Has(tool) {
		return Decision{}, fmt.Errorf("%w: %q", ErrToolNotFound, tool)
	}
	d := conn.Policy.Explain(subject, tool, snap.Names)
	if d.Allowed && !p.Pins.Pinned(conn.ID, snap)(tool) {
		return Decision{}, fmt.Errorf("%w: %q", ErrToolChanged, tool)
	}
	return d, nil
}

// Call calls tool on conn for caller with body as its arguments (a JSON
// object; empty means {}). In order, before anything goes upstream: the tool
// must be discovered (ErrToolNotFound), allowed for the caller's subject
// (ErrToolForbidden) and listed as pinned (ErrToolChanged). The arguments
// must satisfy its input_schema
// (*ArgumentsError); the caller's namespace must be within the rate limit
// and the breaker closed (*RetryError). Upstream failures are
// *UpstreamError; a tool that runs and fails is a CallResult with IsError.
func (p *Engine) Call(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh) (*CallResult, error) {
	return p.CallTool(ctx, conn, caller, tool, body, refresh, nil)
}

// SessionCall is where a call of the MCP endpoint runs: the agent
// session's own upstream session, the tools that session lists (a server
// may offer each session other tools, e.g. by the capabilities its client
// declared), and what to hand the agent of what the server sends during
// the call.
type SessionCall struct {
	Upstream *Upstream
	Tools    func(context.Context, *Conn) (*catalog.Catalog, error)
	Relay    *CallRelay
	// task, when set, makes the call task-augmented; own is told the id
	// of the task the server created.
	Task *tasks.Spec
	Own  func(taskID string)
	// Raw keeps the result as the server wrote it (CallResult.Raw), for
	// a relay that passes it on: it is not decoded.
	Raw bool
}

// CallTool is Call, on the agent session of sc when it is not nil (else
// on the connection's shared upstream session, checked against its
// discovery, with nothing relayed).
func (p *Engine) CallTool(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh, sc *SessionCall) (*CallResult, error) {
	ctx, span := p.tracer.Start(ctx, "mcp.tool_call", oteltrace.SpanKindInternal)
	defer span.End()
	res, result, err := p.call(ctx, conn, caller, tool, body, refresh, sc)
	p.Metrics.Called(conn.ID, tool, result)
	p.Decide(ctx, conn, caller, "tools/call", tool, result, err)
	if span.IsRecording() {
		span.SetAttributes(tracing.ConnectionID.String(conn.ID), attribute.String("mcp.tool.name", textcap.Clip(tool, textcap.Name)), attribute.String("mcp.result", result))
		if err != nil {
			span.SetStatus(codes.Error, result)
		}
	}
	return res, err
}

func (p *Engine) call(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh, sc *SessionCall) (*CallResult, string, error) {
	ctx, cancel := context.WithTimeout(withSubject(ctx, caller.Subject), p.timeout)
	defer cancel()
	if sc == nil {
		sc = &SessionCall{}
	}
	var st *Conn
	var snap *catalog.Catalog
	var err error
	if sc.Tools == nil {
		st, snap, err = p.lookup(ctx, conn, refresh)
	} else if st, err = p.State(conn); err == nil {
		snap, err = sc.Tools(ctx, st)
	}
	if err != nil {
		if errors.Is(err, ErrCircuitOpen) {
			return nil, metrics.CallCircuitOpen, err
		}
		return nil, metrics.CallError, err
	}
	if !snap.Has(tool) {
		// The name is the caller's choice, logged and traced: asking for
		// one costs a call of the rate limit, as a call does.
		if ok, wait := p.limits.Allow(conn.ID, caller.Namespace, p.now()); !ok {
			return nil, metrics.CallRateLimited, &RetryError{Err: ErrRateLimited, RetryAfter: wait}
		}
		return nil, metrics.CallNotFound, fmt.Errorf("%w: %q", ErrToolNotFound, textcap.Clip(tool, textcap.Name))
	}
	if d := conn.Policy.Explain(caller.Subject, tool, snap.Names); !d.Allowed {
		return nil, metrics.CallFiltered, fmt.Errorf("%w: %q (%s)", ErrToolForbidden, tool, d.Source)
	}
	if !p.Pins.Pinned(conn.ID, snap)(tool) {
		return nil, metrics.CallToolChanged, fmt.Errorf("%w: %q", ErrToolChanged, tool)
	}
	args, raw, err := arguments.Decode(body)
	if err != nil {
		return nil, metrics.CallInvalidArguments, &ArgumentsError{Tool: tool, Failures: []ArgumentFailure{{Path: "", Message: err.Error()}}}
	}
	schema, err := snap.Schema(tool)
	if err != nil {
		return nil, metrics.CallError, &UpstreamError{ConnectionID: conn.ID, Message: "tool " + tool + " has an unusable input_schema"}
	}
	if fails := schema.Check(args); len(fails) > 0 {
		return nil, metrics.CallInvalidArguments, &ArgumentsError{Tool: tool, Failures: fails}
	}
	if ok, wait := p.limits.Allow(conn.ID, caller.Namespace, p.now()); !ok {
		return nil, metrics.CallRateLimited, &RetryError{Err: ErrRateLimited, RetryAfter: wait}
	}
	if conn.Hold != nil {
		if err := conn.Hold(ctx, caller, tool, raw); err != nil {
			return nil, metrics.CallHeld, err
		}
	}
	var result json.RawMessage
	if sc.Task != nil {
		var created *CallResult
		created, result, err = p.callAsTask(ctx, st, conn, tool, raw, sc)
		if created != nil {
			return created, metrics.CallTaskCreated, nil
		}
	} else {
		params := &mcp.CallToolParams{Name: tool, Arguments: raw}
		err = p.Guarded(ctx, st, sc.Upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
			var err error
			result, err = p.exchangeCall(ctx, st, cs, params, snap.Tool(tool).InputSchema, sc.Relay)
			return err
		})
	}
	if err != nil {
		if errors.Is(err, ErrCircuitOpen) {
			return nil, metrics.CallCircuitOpen, err
		}
		return nil, metrics.CallError, err
	}
	if result, err = scrub.LaunderJSON(st.Scrubber.Load(), result); err != nil {
		return nil, metrics.CallError, &UpstreamError{ConnectionID: conn.ID, Message: "tool " + tool + " returned a result that cannot be checked for secrets"}
	}
	out, err := callResult(conn.ID, tool, result, sc.Raw)
	if err != nil {
		return nil, metrics.CallError, err
	}
	if out.IsError {
		return out, metrics.CallToolError, nil
	}
	return out, metrics.CallSuccess, nil
}

// callResult is the CallResult of a tool's result, raw as the server wrote
// it (scrubbed): decoded, or kept as JSON with only isError read.
func callResult(connID, tool string, raw json.RawMessage, keep bool) (*CallResult, error) {
	out := &CallResult{ConnectionID: connID, Tool: tool}
	if keep {
		// raw was read whole as JSON, or encoded by the scrubber.
		fields, ok := wire.Fields(raw)
		if !ok {
			return nil, errors.New("tools/call: unreadable result: not a JSON object")
		}
		out.raw, out.IsError = raw, string(fields["isError"]) == "true"
		return out, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("tools/call: unreadable result: %w", err)
	}
	out.Content, out.StructuredContent, out.IsError, out.meta = res.Content, res.StructuredContent, res.IsError, res.Meta
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	return out, nil
}
