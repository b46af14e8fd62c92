package mcpproxy

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
}

// lookup returns the connection's state and its discovery per refresh.
func (p *Proxy) lookup(ctx context.Context, conn *Connection, refresh Refresh) (*connState, *catalog.Catalog, error) {
	st, err := p.state(conn)
	if err != nil {
		return nil, nil, err
	}
	snap, err := p.discover(ctx, st, refresh)
	return st, snap, err
}

// Discover returns the connection's full, unfiltered discovery, for the
// admin discover route (whose default is RefreshForce).
func (p *Proxy) Discover(ctx context.Context, conn *Connection, refresh Refresh) (Discovery, error) {
	_, snap, err := p.lookup(ctx, conn, refresh)
	if err != nil {
		return Discovery{}, err
	}
	d := snap.Discovery
	d.Tools = append([]Tool{}, snap.Discovery.Tools...)
	return d, nil
}

// Tools returns the tools subject may see on conn.
func (p *Proxy) Tools(ctx context.Context, conn *Connection, subject string, refresh Refresh) (*ToolList, error) {
	_, snap, err := p.lookup(ctx, conn, refresh)
	if err != nil {
		return nil, err
	}
	pinned := p.pins.pinned(conn.ID, snap)
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
func (p *Proxy) Explain(ctx context.Context, conn *Connection, subject, tool string, refresh Refresh) (Decision, error) {
	_, snap, err := p.lookup(ctx, conn, refresh)
	if err != nil {
		return Decision{}, err
	}
	if !snap.Has(tool) {
		return Decision{}, fmt.Errorf("%w: %q", ErrToolNotFound, tool)
	}
	d := conn.Policy.Explain(subject, tool, snap.Names)
	if d.Allowed && !p.pins.pinned(conn.ID, snap)(tool) {
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
func (p *Proxy) Call(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh) (*CallResult, error) {
	return p.callTool(ctx, conn, caller, tool, body, refresh, nil)
}

// sessionCall is where a call of the MCP endpoint runs: the agent
// session's own upstream session, the tools that session lists (a server
// may offer each session other tools, e.g. by the capabilities its client
// declared), and what to hand the agent of what the server sends during
// the call.
type sessionCall struct {
	upstream *upstreamSession
	tools    func(context.Context, *connState) (*catalog.Catalog, error)
	relay    *callRelay
	// task, when set, makes the call task-augmented; own is told the id
	// of the task the server created.
	task *tasks.Spec
	own  func(taskID string)
}

// callTool is Call, on the agent session of sc when it is not nil (else
// on the connection's shared upstream session, checked against its
// discovery, with nothing relayed).
func (p *Proxy) callTool(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh, sc *sessionCall) (*CallResult, error) {
	ctx, span := p.tracer.Start(ctx, "mcp.tool_call", oteltrace.SpanKindInternal)
	defer span.End()
	res, result, err := p.call(ctx, conn, caller, tool, body, refresh, sc)
	p.metrics.Called(conn.ID, tool, result)
	p.decide(ctx, conn, caller, "tools/call", tool, result, err)
	if span.IsRecording() {
		span.SetAttributes(tracing.ConnectionID.String(conn.ID), attribute.String("mcp.tool.name", textcap.Clip(tool, textcap.Name)), attribute.String("mcp.result", result))
		if err != nil {
			span.SetStatus(codes.Error, result)
		}
	}
	return res, err
}

func (p *Proxy) call(ctx context.Context, conn *Connection, caller mcpevent.Caller, tool string, body []byte, refresh Refresh, sc *sessionCall) (*CallResult, string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if sc == nil {
		sc = &sessionCall{}
	}
	var st *connState
	var snap *catalog.Catalog
	var err error
	if sc.tools == nil {
		st, snap, err = p.lookup(ctx, conn, refresh)
	} else if st, err = p.state(conn); err == nil {
		snap, err = sc.tools(ctx, st)
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
	if !p.pins.pinned(conn.ID, snap)(tool) {
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
	var res *mcp.CallToolResult
	if sc.task != nil {
		var created *CallResult
		created, res, err = p.callAsTask(ctx, st, conn, tool, raw, sc)
		if created != nil {
			return created, metrics.CallTaskCreated, nil
		}
	} else {
		params := &mcp.CallToolParams{Name: tool, Arguments: raw}
		err = p.guarded(ctx, st, sc.upstream, func(ctx context.Context, cs *mcp.ClientSession) error {
			var err error
			res, err = p.exchangeCall(ctx, st, cs, params, snap.Tool(tool).InputSchema, sc.relay)
			return err
		})
	}
	if err != nil {
		if errors.Is(err, ErrCircuitOpen) {
			return nil, metrics.CallCircuitOpen, err
		}
		return nil, metrics.CallError, err
	}
	if res, err = scrub.Launder(st.scrubber.Load(), res); err != nil {
		return nil, metrics.CallError, &UpstreamError{ConnectionID: conn.ID, Message: "tool " + tool + " returned a result that cannot be checked for secrets"}
	}
	out := &CallResult{
		ConnectionID:      conn.ID,
		Tool:              tool,
		Content:           res.Content,
		StructuredContent: res.StructuredContent,
		IsError:           res.IsError,
		meta:              res.Meta,
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	if res.IsError {
		return out, metrics.CallToolError, nil
	}
	return out, metrics.CallSuccess, nil
}
