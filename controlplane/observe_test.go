package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/internal/testlog"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsCountRoutesClaimsAndQueue(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) { checkMetrics(t, engine) })
	}
}

func checkMetrics(t *testing.T, engine string) {
	var logs testlog.Buffer
	e := newEnv(t, openStore(t, storeConfig(t, engine)), func(c *Config) {
		c.Metrics = prometheus.NewRegistry()
		c.AccessLog = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	e.seed(map[string]any{
		"namespaces": []string{"alice"},
		"services":   []map[string]any{{"slug": "github", "name": "GitHub", "owner": "alice"}},
		"claims": []map[string]any{
			{"namespace": "alice", "service": "github", "public_key": pubKey(newAgent(t, "alice")), "status": "pending"},
			{"namespace": "alice", "service": "github", "public_key": pubKey(newAgent(t, "alice")), "status": "approved"},
		},
	})
	e.do("GET", "/v1/services/svc_nope", nil, withSession("not-a-session"))
	e.do("GET", "/health", nil).want(t, http.StatusOK, "")

	if got := testutil.ToFloat64(e.srv.obs.requests.WithLabelValues("/health", "GET", "200")); got != 1 {
		t.Errorf("requests{route=/health} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.obs.requests.WithLabelValues("/v1/services/{id}", "GET", "401")); got != 1 {
		t.Errorf("requests{route=/v1/services/{id},status=401} = %v, want 1 (the route pattern, never the raw path)", got)
	}
	r := e.do("GET", "/metrics", nil).want(t, http.StatusOK, "")
	for _, want := range []string{
		`idn_controlplane_claims{status="pending"} 1`,
		`idn_controlplane_claims{status="approved"} 1`,
		`idn_controlplane_namespaces_by_pending_claims{bucket="1"} 1`,
		`idn_controlplane_webhook_queue_depth 0`,
		`idn_controlplane_store_scrape_error 0`,
		`go_sql_max_open_connections{db_name="controlplane"}`,
		`idn_controlplane_http_request_duration_seconds_bucket{method="GET",route="/health"`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	out := logs.String()
	if strings.Contains(out, "svc_nope") || strings.Contains(out, "not-a-session") {
		t.Errorf("the request log carries a raw path or a cookie:\n%s", out)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, `"route":"/health"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range []string{"request_id", "method", "route", "status", "duration_ms"} {
		if _, ok := line[k]; !ok {
			t.Errorf("request log line lacks %q: %v", k, line)
		}
	}
}

func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	st := openStore(t, storeConfig(t, ProviderSQLite))
	tests := []struct {
		name   string
		cfg    func(*Config)
		remote string
		auth   string
		want   int
	}{
		{"no registry: no route", func(*Config) {}, "127.0.0.1:4000", "", http.StatusNotFound},
		{"loopback peer", func(c *Config) { c.Metrics = prometheus.NewRegistry() }, "127.0.0.1:4000", "", http.StatusOK},
		{"remote peer without token", func(c *Config) { c.Metrics = prometheus.NewRegistry() }, "203.0.113.9:4000", "", http.StatusForbidden},
		{"remote peer with a forged forwarded loopback address", func(c *Config) { c.Metrics = prometheus.NewRegistry() }, "203.0.113.9:4000", "", http.StatusForbidden},
		{"remote peer with the token", func(c *Config) { c.Metrics, c.MetricsToken = prometheus.NewRegistry(), "scrape-token" }, "203.0.113.9:4000", "Bearer scrape-token", http.StatusOK},
		{"remote peer with a wrong token", func(c *Config) { c.Metrics, c.MetricsToken = prometheus.NewRegistry(), "scrape-token" }, "203.0.113.9:4000", "Bearer scrape-tokem", http.StatusForbidden},
		{"loopback peer naming a rebound host", func(c *Config) { c.Metrics = prometheus.NewRegistry() }, "127.0.0.1:4000", "", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Store: st, JWTSecret: testSecret}
			tt.cfg(&cfg)
			srv, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(context.Background(), "GET", "/metrics", nil)
			req.RemoteAddr, req.Host = tt.remote, "127.0.0.1:8787"
			if strings.Contains(tt.name, "rebound") {
				req.Host = "rebind.evil.example:8787"
			}
			req.Header.Set("X-Forwarded-For", "127.0.0.1")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
		})
	}
}

// TestStartOnce: Start runs the background work once; Close stops it
// and may be called again.
func TestStartOnce(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		if err := e.srv.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := e.srv.Start(t.Context()); !errors.Is(err, ErrStarted) {
			t.Fatalf("second Start: %v, want ErrStarted", err)
		}
		if err := e.srv.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.srv.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestHealthProbes(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		e.do("GET", "/health/live", nil).want(t, http.StatusOK, "")
		r := e.do("GET", "/health/ready", nil).want(t, http.StatusOK, "")
		if got := r.json(t); got["status"] != "ready" {
			t.Fatalf("ready = %v", got)
		}
		if err := e.srv.Up(t.Context()); err != nil {
			t.Fatalf("Up on a ready server: %v", err)
		}
		// A schema newer than this binary's migrations is not ready.
		if _, err := e.st.db.Exec(context.Background(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from a newer binary', 0)`); err != nil {
			t.Fatal(err)
		}
		r = e.do("GET", "/health/ready", nil).want(t, http.StatusServiceUnavailable, "")
		if checks, _ := r.json(t)["checks"].(map[string]any); checks["migrations"] != "not current" {
			t.Fatalf("checks = %v", checks)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		if err := e.srv.Up(ctx); !errors.Is(err, errMigrationsNotCurrent) {
			t.Fatalf("Up beside a newer schema: %v, want %v", err, errMigrationsNotCurrent)
		}
		e.st.Close()
		r = e.do("GET", "/health/ready", nil).want(t, http.StatusServiceUnavailable, "")
		if checks, _ := r.json(t)["checks"].(map[string]any); checks["database"] != "unreachable" {
			t.Fatalf("checks after close = %v", checks)
		}
	})
}
