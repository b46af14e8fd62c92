package mcpproxy

import "github.com/prometheus/client_golang/prometheus"

// Discovery results of idn_gateway_mcp_discovery_total.
const (
	discoverySuccess      = "success"
	discoveryError        = "error"
	discoveryCacheHit     = "cache_hit"
	discoveryStaleIfError = "stale_if_error"
	discoveryCircuitOpen  = "circuit_open"
)

// Tool-call results of idn_gateway_mcp_tool_call_total.
const (
	callSuccess          = "success"
	callToolError        = "tool_error" // the tool ran and reported is_error
	callError            = "error"      // upstream failure
	callFiltered         = "filtered"
	callNotFound         = "not_found"
	callInvalidArguments = "invalid_arguments"
	callRateLimited      = "rate_limited"
	callCircuitOpen      = "circuit_open"
	callTaskCreated      = "task_created" // a task-augmented call the server made a task of
)

type metrics struct {
	discovery *prometheus.CounterVec
	calls     *prometheus.CounterVec
	tasks     *prometheus.CounterVec
	sessions  prometheus.Gauge
	evictions prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		discovery: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_discovery_total",
			Help: "MCP tool discoveries by result (success, error, cache_hit, stale_if_error, circuit_open).",
		}, []string{"result"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_tool_call_total",
			Help: "MCP tool calls by result (success, tool_error, error, filtered, not_found, invalid_arguments, rate_limited, circuit_open, task_created).",
		}, []string{"result"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_task_total",
			Help: "MCP tasks methods (result success, error, not_owned) and task status notifications (relayed, no_stream, not_owned) by method.",
		}, []string{"method", "result"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idn_gateway_mcp_sessions",
			Help: "Sessions open on the MCP endpoint /mcp/{connection_id}.",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idn_gateway_mcp_sessions_evicted_total",
			Help: "Sessions of the MCP endpoint ended because their caller opened one past its share.",
		}),
	}
	for _, r := range []string{discoverySuccess, discoveryError, discoveryCacheHit, discoveryStaleIfError, discoveryCircuitOpen} {
		m.discovery.WithLabelValues(r)
	}
	for _, r := range []string{callSuccess, callToolError, callError, callFiltered, callNotFound, callInvalidArguments, callRateLimited, callCircuitOpen, callTaskCreated} {
		m.calls.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.discovery, m.calls, m.tasks, m.sessions, m.evictions} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
