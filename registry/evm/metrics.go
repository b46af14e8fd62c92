package evm

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the backend's Prometheus collectors.
type metrics struct {
	writes       *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	failures     *prometheus.CounterVec
	nonceResyncs prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_registry_writes_total",
			Help: "Registry writes by contract function and outcome: sent (mined), already_on_chain (found done, not sent again) or failed.",
		}, []string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idn_registry_write_duration_seconds",
			Help:    "Latency of mined registry writes, from gas estimation to receipt.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60},
		}, []string{"op"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_registry_write_failures_total",
			Help: "Failed registry writes by contract function and reason: reverted, rpc_unavailable, receipt_timeout, insufficient_funds or nonce.",
		}, []string{"op", "reason"}),
		nonceResyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idn_registry_nonce_resyncs_total",
			Help: "Sends refused for their nonce (another writer shares the relayer key), after which the nonce was read again.",
		}),
	}
}

func (m *metrics) observe(op string, d time.Duration, err error) {
	if err == nil {
		m.writes.WithLabelValues(op, "sent").Inc()
		m.latency.WithLabelValues(op).Observe(d.Seconds())
		return
	}
	reason := ReasonRPC
	var we *WriteError
	if errors.As(err, &we) {
		reason = we.Reason
	}
	m.writes.WithLabelValues(op, "failed").Inc()
	m.failures.WithLabelValues(op, reason).Inc()
}

// Collectors returns the backend's metrics: writes by outcome, write
// latency, failures by reason and nonce resyncs. Register them on the
// registry that serves /metrics, e.g.
// controlplane.Config.Metrics.MustRegister(b.Collectors()...).
func (b *Backend) Collectors() []prometheus.Collector {
	m := b.metrics
	return []prometheus.Collector{m.writes, m.latency, m.failures, m.nonceResyncs}
}
