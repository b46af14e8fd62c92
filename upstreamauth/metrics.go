package upstreamauth

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the token request collectors, listed in docs/gateway.md.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewMetrics creates the collectors and registers them with reg (nil
// means they are not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_gateway_oauth_token_requests_total",
			Help: "Token requests to OAuth providers, by result (success, unavailable, reconnect_required).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "idn_gateway_oauth_token_refresh_duration_seconds",
			Help:    "Time taken by token requests to OAuth providers, whatever their result.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	for _, result := range []string{"success", "unavailable", "reconnect_required"} {
		m.requests.WithLabelValues(result) // every series from the start
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) observe(result string, d time.Duration) {
	m.requests.WithLabelValues(result).Inc()
	m.latency.Observe(d.Seconds())
}
