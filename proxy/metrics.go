package proxy

import (
	"fmt"
	"time"

	"github.com/idnhq/idn/internal/labelcap"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus collectors (idn_gateway_*, listed
// in docs/gateway.md). Create them with NewMetrics and share one
// set between the Handler and the process that owns the server (which
// records the shutdown drain).
type Metrics struct {
	authReject       *prometheus.CounterVec
	replayDetected   prometheus.Counter
	nonceStoreFull   prometheus.Counter
	upstreamRequests *prometheus.CounterVec
	upstreamLatency  *prometheus.HistogramVec
	upstreamErrors   *prometheus.CounterVec
	inFlight         prometheus.Gauge
	drainTotal       *prometheus.CounterVec
	drainSeconds     *prometheus.HistogramVec
	connections      *labelcap.Set // the connection label's values
}

// MaxConnectionLabels is how many distinct connection ids the connection
// label takes; the connections past it count under "other".
const MaxConnectionLabels = 200

// connection is the connection label of id.
func (m *Metrics) connection(id string) string {
	if id == "" {
		return labelcap.Other
	}
	return m.connections.Value(id)
}

// NewMetrics creates the collectors and registers them with reg (nil means
// they are not registered, e.g. in tests that read them directly).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		authReject: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_auth_reject_total",
			Help: "Runtime requests refused by authentication, by reason (error code).",
		}, []string{"reason"}),
		replayDetected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idn_gateway_replay_detected_total",
			Help: "Requests refused because their nonce was already used.",
		}),
		nonceStoreFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idn_gateway_nonce_store_full_total",
			Help: "Requests refused with 503 because the nonce store was full.",
		}),
		upstreamRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_upstream_requests_total",
			Help: "Requests forwarded upstream, by protocol, connection and outcome.",
		}, []string{"protocol", "connection", "outcome"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idn_gateway_upstream_latency_seconds",
			Help:    "Time to the upstream response headers, by protocol, connection and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"protocol", "connection", "outcome"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_upstream_error_total",
			Help: "Upstream failures, by class (timeout, connect, reset, canceled, other).",
		}, []string{"class"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "idn_gateway_requests_in_flight",
			Help: "Runtime requests being served.",
		}),
		drainTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_shutdown_drain_total",
			Help: "Graceful shutdowns, by outcome (success, timeout).",
		}, []string{"outcome"}),
		drainSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idn_gateway_shutdown_drain_seconds",
			Help:    "Time taken to drain in-flight requests at shutdown, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}, []string{"outcome"}),
		connections: labelcap.New(MaxConnectionLabels),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{
			m.authReject, m.replayDetected, m.nonceStoreFull, m.upstreamRequests, m.upstreamLatency,
			m.upstreamErrors, m.inFlight, m.drainTotal, m.drainSeconds,
		} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("proxy: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// ObserveDrain records one graceful shutdown: outcome is "success" or
// "timeout", d the time spent draining.
func (m *Metrics) ObserveDrain(outcome string, d time.Duration) {
	m.drainTotal.WithLabelValues(outcome).Inc()
	m.drainSeconds.WithLabelValues(outcome).Observe(d.Seconds())
}
