// Package metrics is the MCP proxy's Prometheus metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/idnhq/idn/internal/labelcap"
)

// Caps of the tool-call labels: the first MaxConnectionLabels connection
// ids and MaxToolLabels tool names seen are labels of their own, later
// ones count under "other". A tool the connection does not have
// (not_found) always counts under "other": callers choose those names.
const (
	MaxConnectionLabels = 200
	MaxToolLabels       = 500
)

// Discovery results of idn_gateway_mcp_discovery_total.
const (
	DiscoverySuccess      = "success"
	DiscoveryError        = "error"
	DiscoveryCacheHit     = "cache_hit"
	DiscoveryStaleIfError = "stale_if_error"
	DiscoveryCircuitOpen  = "circuit_open"
)

// Tool-call results of idn_gateway_mcp_tool_call_total.
const (
	CallSuccess          = "success"
	CallToolError        = "tool_error" // the tool ran and reported is_error
	CallError            = "error"      // upstream failure
	CallFiltered         = "filtered"
	CallToolChanged      = "tool_changed" // its definition is not the pinned one
	CallNotFound         = "not_found"
	CallInvalidArguments = "invalid_arguments"
	CallRateLimited      = "rate_limited"
	CallCircuitOpen      = "circuit_open"
	CallTaskCreated      = "task_created" // a task-augmented call the server made a task of
	CallHeld             = "held"         // Connection.Hold refused it (the owner's approval is pending or denied)
)

// Set is the metrics of one proxy.
type Set struct {
	Discovery *prometheus.CounterVec
	Calls     *prometheus.CounterVec
	Tasks     *prometheus.CounterVec
	Sessions  prometheus.Gauge
	Evictions prometheus.Counter
	// ServerRequestsDropped counts the upstream servers' requests past
	// the bounds on those answered at once.
	ServerRequestsDropped prometheus.Counter

	connections, tools *labelcap.Set
}

// Called counts one tool call of tool on connection conn.
func (m *Set) Called(conn, tool, result string) {
	t := labelcap.Other
	if result != CallNotFound && tool != "" {
		t = m.tools.Value(tool)
	}
	m.Calls.WithLabelValues(m.connections.Value(conn), t, result).Inc()
}

// New returns a Set registered with reg (nil: none).
func New(reg prometheus.Registerer) (*Set, error) {
	m := &Set{
		Discovery: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_discovery_total",
			Help: "MCP tool discoveries by result (success, error, cache_hit, stale_if_error, circuit_open).",
		}, []string{"result"}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_tool_call_total",
			Help: "MCP tool calls by connection, tool and result (success, tool_error, error, filtered, tool_changed, not_found, invalid_arguments, rate_limited, circuit_open, task_created).",
		}, []string{"connection", "tool", "result"}),
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_task_total",
			Help: "MCP tasks methods (result success, error, not_owned) and task status notifications (relayed, no_stream, not_owned) by method.",
		}, []string{"method", "result"}),
		Sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idn_gateway_mcp_sessions",
			Help: "Sessions open on the MCP endpoint /mcp/{connection_id}.",
		}),
		Evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_sessions_evicted_total",
			Help: "Sessions of the MCP endpoint ended because their caller opened one past its share.",
		}),
		ServerRequestsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_server_requests_dropped_total",
			Help: "Requests of upstream MCP servers dropped unanswered: past the requests one session, or one connection, answers at once.",
		}),
		connections: labelcap.New(MaxConnectionLabels),
		tools:       labelcap.New(MaxToolLabels),
	}
	for _, r := range []string{DiscoverySuccess, DiscoveryError, DiscoveryCacheHit, DiscoveryStaleIfError, DiscoveryCircuitOpen} {
		m.Discovery.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Discovery, m.Calls, m.Tasks, m.Sessions, m.Evictions, m.ServerRequestsDropped} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
