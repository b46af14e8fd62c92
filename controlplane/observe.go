package controlplane

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/web"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// observer counts and logs every request, and publishes the store's state
// as metrics when a registry is configured.
type observer struct {
	access   *slog.Logger // nil: no request log
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	gather   http.Handler // nil: /metrics is not served
	token    string
	proxy    clientip.Resolver
}

// newObserver registers the control plane's collectors on reg (when not
// nil); the webhook part registers its own. The request counters exist
// either way, so the code that updates them needs no checks.
func newObserver(s *Server) (*observer, error) {
	o := &observer{
		access: s.cfg.AccessLog,
		token:  s.cfg.MetricsToken,
		proxy:  s.proxy,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idn_controlplane_http_requests_total",
			Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idn_controlplane_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method"}),
	}
	reg := s.cfg.Metrics
	if reg == nil {
		return o, nil
	}
	cs := []prometheus.Collector{
		o.requests, o.duration,
		storeCollector{store: s.store},
		s.store.db.Collector("controlplane"),
	}
	if s.registry != nil {
		cs = append(cs, s.registry) // the registry queue
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	o.gather = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return o, nil
}

// wrap counts, times and logs each request under the route pattern the mux
// matched (never the raw path, which carries ids, nor the query, cookies or
// headers).
func (o *observer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set on r by the ServeMux that served it
		if route == "" || route == "/" {
			route = "unmatched"
		} else if _, path, ok := strings.Cut(route, " "); ok {
			route = path
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		elapsed := time.Since(start)
		// A client can send any token as a method: a label of its own
		// each would grow the metrics without bound.
		method := textcap.Method(r.Method)
		o.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		o.duration.WithLabelValues(route, method).Observe(elapsed.Seconds())
		if o.access != nil {
			o.access.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("request_id", apierror.RequestIDFrom(r.Context())),
				slog.String("method", method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000))
		}
	})
}

// serveMetrics answers GET /metrics to loopback peers and to bearers of
// MetricsToken; 404 when no registry is configured.
func (o *observer) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if o.gather == nil {
		apierror.Write(w, r, web.ErrNotFound)
		return
	}
	if !o.metricsAllowed(r) {
		apierror.Write(w, r, errMetricsForbidden)
		return
	}
	o.gather.ServeHTTP(w, r)
}

// metricsAllowed admits a loopback client by the gateway's rule
// (clientip.Resolver.IsLoopback): a same-host reverse proxy not listed in
// TrustedProxies forwards for anyone, so what it forwards is refused. The
// client must also have addressed a loopback Host: a page whose own name
// was rebound to 127.0.0.1 (DNS rebinding) comes from a loopback peer but
// names itself.
func (o *observer) metricsAllowed(r *http.Request) bool {
	if o.token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(got), []byte(o.token)) == 1 {
			return true
		}
	}
	return o.proxy.IsLoopback(r) && clientip.LoopbackHost(o.proxy.Host(r))
}

// statusRecorder remembers the status a handler wrote. It unwraps for
// http.ResponseController and forwards Flush, so streamed answers stream.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// storeCollector reads the store's state at scrape time.
type storeCollector struct{ store *Store }

var (
	claimsDesc = prometheus.NewDesc("idn_controlplane_claims",
		"Claims by status.", []string{"status"}, nil)
	pendingDesc = prometheus.NewDesc("idn_controlplane_namespaces_by_pending_claims",
		"Namespaces by how many pending claims they hold (bucket: 1, 2-5, 6-20, 21+).", []string{"bucket"}, nil)
	webhookQueueDesc = prometheus.NewDesc("idn_controlplane_webhook_queue_depth",
		"Webhook deliveries waiting for an attempt.", nil, nil)
	scrapeErrorDesc = prometheus.NewDesc("idn_controlplane_store_scrape_error",
		"1 when the last scrape could not read the store.", nil, nil)
)

// pendingBuckets are the upper bounds of the pending-claims buckets.
var pendingBuckets = []struct {
	max   int
	label string
}{{1, "1"}, {5, "2-5"}, {20, "6-20"}, {int(^uint(0) >> 1), "21+"}}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- claimsDesc
	ch <- pendingDesc
	ch <- webhookQueueDesc
	ch <- scrapeErrorDesc
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	failed := 0.0
	if err := c.collect(ctx, ch); err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
}

func (c storeCollector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	byStatus := map[string]float64{"pending": 0, "approved": 0, "revoked": 0, "rejected": 0, "expired": 0}
	rows, err := c.store.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM claims GROUP BY status`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var status string
		var n float64
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return err
		}
		byStatus[status] = n
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for status, n := range byStatus {
		ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, n, status)
	}

	buckets := make([]float64, len(pendingBuckets))
	rows, err = c.store.db.QueryContext(ctx, `SELECT COUNT(*) FROM claims WHERE status = 'pending' GROUP BY namespace`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		for i, b := range pendingBuckets {
			if n <= b.max {
				buckets[i]++
				break
			}
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for i, b := range pendingBuckets {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, buckets[i], b.label)
	}

	var queued float64
	if err := c.store.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending'`).Scan(&queued); err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(webhookQueueDesc, prometheus.GaugeValue, queued)
	return nil
}

// healthLive is GET /health/live: the process answers.
func (s *Server) healthLive(w http.ResponseWriter, _ *http.Request) {
	apierror.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// healthReady is GET /health/ready: the database answers and its schema is
// the one this binary expects (an older binary beside a newer schema, or a
// migration that has not run, is not ready).
func (s *Server) healthReady(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{"database": "ok", "migrations": "ok"}
	status, code := "ready", http.StatusOK
	switch err := s.ready(r.Context()); {
	case errors.Is(err, errDatabaseUnreachable):
		checks["database"], checks["migrations"] = "unreachable", "unknown"
	case errors.Is(err, errMigrationsUnreadable):
		checks["migrations"] = "unreadable"
	case errors.Is(err, errMigrationsNotCurrent):
		checks["migrations"] = "not current"
	}
	if checks["database"] != "ok" || checks["migrations"] != "ok" {
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	apierror.WriteJSON(w, code, map[string]any{"status": status, "checks": checks, "version": buildinfo.Version()})
}

// Why a Server is not ready (ready, Up).
var (
	errDatabaseUnreachable  = errors.New("the database does not answer")
	errMigrationsUnreadable = errors.New("the schema's version cannot be read")
	errMigrationsNotCurrent = errors.New("the schema is not the one this binary expects")
)

// ready checks what readiness needs, within two seconds.
func (s *Server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %w", errDatabaseUnreachable, err)
	}
	current, err := s.store.db.MigrationsCurrent(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", errMigrationsUnreadable, err)
	case !current:
		return errMigrationsNotCurrent
	}
	return nil
}
