package proxy

import (
	"context"
	"log/slog"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpevent"
)

// MCPObserver counts and logs the gateway's MCP traffic as the Handler
// does its REST traffic: every upstream exchange in
// idn_gateway_upstream_requests_total and idn_gateway_upstream_latency_seconds
// with protocol="mcp", failures in idn_gateway_upstream_error_total, and
// one decision record ("upstream") per exchange and one ("mcp") per tool
// listing and tool call, fingerprinted as the others are. Upstream and
// Decision are the MCP engine's hooks (mcpproxy.Config.OnUpstream and
// OnDecision).
type MCPObserver struct {
	metrics   *Metrics
	decisions *decisionLog
}

// NewMCPObserver returns the observer that records into m and, when
// logger is not nil, writes decision records to it with identities
// fingerprinted under salt (the Handler's DecisionLog and LogSalt).
func NewMCPObserver(m *Metrics, logger *slog.Logger, salt []byte) *MCPObserver {
	o := &MCPObserver{metrics: m}
	if logger != nil {
		o.decisions = &decisionLog{logger: logger, salt: salt}
	}
	return o
}

// Upstream records one exchange with an upstream MCP server.
func (o *MCPObserver) Upstream(ctx context.Context, e mcpevent.Exchange) {
	outcome, code := "", ""
	if e.Err != nil {
		class, timeout := upstreamClass(e.Err)
		outcome, code = "error", errcode.UpstreamError.String()
		if timeout {
			outcome = "timeout"
		}
		if o.metrics != nil {
			o.metrics.upstreamErrors.WithLabelValues(class).Inc()
		}
	} else {
		outcome = outcomeOf(e.Status)
	}
	if o.metrics != nil {
		conn := o.metrics.connection(e.ConnectionID)
		o.metrics.upstreamRequests.WithLabelValues("mcp", conn, outcome).Inc()
		o.metrics.upstreamLatency.WithLabelValues("mcp", conn, outcome).Observe(e.Elapsed.Seconds())
	}
	o.decisions.log(ctx, decision{
		kind: "upstream", outcome: outcome, code: code, status: e.Status, connection: e.ConnectionID,
		requestID: apierror.RequestIDFrom(ctx), method: e.Method, protocol: "mcp",
		latencyMS: float64(e.Elapsed.Microseconds()) / 1000,
	})
}

// Decision records one tool listing or tool call of a caller.
func (o *MCPObserver) Decision(ctx context.Context, e mcpevent.Decision) {
	o.decisions.log(ctx, decision{
		kind: "mcp", outcome: e.Outcome, code: e.Code, connection: e.ConnectionID,
		requestID: apierror.RequestIDFrom(ctx), method: e.Method, tool: e.Tool, protocol: "mcp",
		namespace: e.Caller.Namespace, subject: e.Caller.Subject, publicKey: e.Caller.Key,
	})
}
