package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/kit/testlog"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
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

// TestMetricsAccess: /metrics serves loopback clients and bearers of the
// metrics token, by the gateway's rule for who is loopback: a loopback
// peer that forwards for someone (a same-host reverse proxy) is refused
// as a remote client is, unless it is a trusted proxy, and then the
// client it names decides.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	st := openStore(t, storeConfig(t, ProviderSQLite))
	withRegistry := func(c *Config) { c.Metrics = prometheus.NewRegistry() }
	withToken := func(c *Config) { c.Metrics, c.MetricsToken = prometheus.NewRegistry(), "scrape-token" }
	trusting := func(cidr string) func(*Config) {
		return func(c *Config) {
			c.Metrics, c.TrustedProxies = prometheus.NewRegistry(), []netip.Prefix{netip.MustParsePrefix(cidr)}
		}
	}
	const loopback, remote, proxy = "127.0.0.1:4000", "203.0.113.9:4000", "10.0.0.1:4000"
	tests := []struct {
		name    string
		cfg     func(*Config)
		remote  string
		headers map[string]string
		want    int
	}{
		{"no registry: no route", func(*Config) {}, loopback, nil, http.StatusNotFound},
		{"loopback peer", withRegistry, loopback, nil, http.StatusOK},
		{"remote peer without token", withRegistry, remote, nil, http.StatusForbidden},
		{"remote peer with a forged forwarded loopback address", withRegistry, remote, map[string]string{"X-Forwarded-For": "127.0.0.1"}, http.StatusForbidden},
		{"remote peer with the token", withToken, remote, map[string]string{"Authorization": "Bearer scrape-token"}, http.StatusOK},
		{"remote peer with a wrong token", withToken, remote, map[string]string{"Authorization": "Bearer scrape-tokem"}, http.StatusForbidden},
		{"loopback peer naming a rebound host", withRegistry, loopback, map[string]string{"Host": "rebind.evil.example:8787"}, http.StatusForbidden},
		{"same-host proxy forwarding X-Forwarded-For, not trusted", withRegistry, loopback, map[string]string{"X-Forwarded-For": "203.0.113.9"}, http.StatusForbidden},
		{"same-host proxy forwarding a loopback X-Forwarded-For, not trusted", withRegistry, loopback, map[string]string{"X-Forwarded-For": "127.0.0.1"}, http.StatusForbidden},
		{"same-host proxy forwarding Forwarded, not trusted", withRegistry, loopback, map[string]string{"Forwarded": "for=203.0.113.9"}, http.StatusForbidden},
		{"same-host proxy forwarding X-Real-IP, not trusted", withRegistry, loopback, map[string]string{"X-Real-IP": "203.0.113.9"}, http.StatusForbidden},
		{"same-host proxy forwarding, with the token", withToken, loopback, map[string]string{"X-Forwarded-For": "203.0.113.9", "Authorization": "Bearer scrape-token"}, http.StatusOK},
		{"trusted proxy relaying a loopback client", trusting("10.0.0.0/8"), proxy, map[string]string{"X-Forwarded-For": "127.0.0.1"}, http.StatusOK},
		{"trusted proxy relaying a remote client", trusting("10.0.0.0/8"), proxy, map[string]string{"X-Forwarded-For": "203.0.113.9"}, http.StatusForbidden},
		{"trusted same-host proxy relaying a remote client", trusting("127.0.0.1/32"), loopback, map[string]string{"X-Forwarded-For": "203.0.113.9"}, http.StatusForbidden},
		{"trusted same-host proxy naming its client in X-Real-IP only", trusting("127.0.0.1/32"), loopback, map[string]string{"X-Real-IP": "203.0.113.9"}, http.StatusForbidden},
		{"trusted proxy relaying a rebound host", trusting("10.0.0.0/8"), proxy, map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "rebind.evil.example"}, http.StatusForbidden},
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
			for k, v := range tt.headers {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if tt.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), `"code":"ADMIN_FORBIDDEN"`) {
				t.Errorf("refused with %s, want ADMIN_FORBIDDEN as a remote client is", rec.Body)
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
