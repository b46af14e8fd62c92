package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/envconf"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// load reads settings the way serve does.
func load(vars map[string]string) (settings, error) {
	r := envconf.New(env(vars))
	s := readSettings(r, env(vars))
	return s, r.Err()
}

const webhookKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestSettingsListEveryProblem(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := run(context.Background(), nil, env(map[string]string{
		"ENVIRONMENT":                "production",
		"ADAPTER_PROVIDER":           "postgres",
		"JWT_SECRET":                 "short-secret-value",
		"MAX_PENDING_AUTHORIZATIONS": "-1",
		"BLOCKCHAIN_MODE":            "queue",
		"ENABLE_TEST_SEED_ENDPOINT":  "true",
		"IDN_TEST_SEED_TOKEN":        "tok",
		"ALLOWED_ORIGINS":            "not an origin",
		"LOG_LEVEL":                  "loud",
		"CONTROLPLANE_PUBLIC_URL":    "ftp://idn.example",
	}), io.Discard, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr.String())
	}
	msg := stderr.String()
	if !strings.HasPrefix(msg, "controlplane serve: configuration problems:\n  - ") {
		t.Errorf("problems are not a list:\n%s", msg)
	}
	for _, want := range []string{"DATABASE_URL is required", "JWT_SECRET must be at least 32", "WEBHOOK_SECRET_ENCRYPTION_KEY is required",
		"WEBAUTHN_ALLOWED_ORIGINS is required", `MAX_PENDING_AUTHORIZATIONS: "-1" is not a whole number >= 1`,
		`CONTROLPLANE_PUBLIC_URL: "ftp://idn.example" is not scheme://host[:port]`, "BLOCKCHAIN_MODE=queue needs IDN_REGISTRY_ADDRESS", "BLOCKCHAIN_MODE=queue needs RELAYER_PRIVATE_KEY",
		"ENABLE_TEST_SEED_ENDPOINT=true needs ENVIRONMENT local or test", "ALLOWED_ORIGINS", `LOG_LEVEL: "loud"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems lack %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "short-secret") {
		t.Error("a problem echoes a secret value")
	}
}

func TestSettingsProduction(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"ENVIRONMENT":                   "production",
		"ADAPTER_PROVIDER":              "postgres",
		"DATABASE_URL":                  "postgres://cp@db/cp",
		"JWT_SECRET":                    strings.Repeat("j", 40),
		"WEBHOOK_SECRET_ENCRYPTION_KEY": webhookKey,
		"WEBAUTHN_ALLOWED_ORIGINS":      "https://dash.example",
		"CONTROLPLANE_PUBLIC_URL":       "https://idn.example/",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	if _, err := load(with(map[string]string{"ENABLE_TEST_SEED_ENDPOINT": "true", "IDN_TEST_SEED_TOKEN": "tok"})); err == nil ||
		!strings.Contains(err.Error(), "ENABLE_TEST_SEED_ENDPOINT") {
		t.Fatalf("seed endpoint in production: %v", err)
	}
	s, err := load(with(map[string]string{
		"PENDING_AUTHORIZATION_EXPIRY_HOURS":   "48",
		"MAX_PENDING_AUTHORIZATIONS_PER_AGENT": "3",
		"CONTROLPLANE_MAX_INFLIGHT_BODY_BYTES": "1048576",
		"CONTROLPLANE_METRICS_TOKEN":           "scrape-token",
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := s.server
	if s.addr != "127.0.0.1:8787" || s.shutdownTimeout != 15*time.Second || c.PendingExpiry != 48*time.Hour || c.MaxPendingPerAgent != 3 ||
		c.MaxPendingClaims != 20 || c.MaxInflightBodyBytes != 1<<20 || c.MaxAPIKeys != 5 || c.TestSeedToken != "" ||
		c.MetricsToken != "scrape-token" || c.SessionTTL != 168*time.Hour ||
		c.InsecureLocalhostCookie || len(c.Webhooks.SecretKey) != 32 || c.Auth.Origins[0] != "https://dash.example" ||
		c.Registry.Mode != "disabled" || c.Auth.ChallengeExpiry != time.Hour || c.Webhooks.MaxPerService != 5 ||
		c.Webhooks.FailureThreshold != 10 || c.Webhooks.RetryWindow != 24*time.Hour || c.Webhooks.InsecureAllowPrivateTargets ||
		c.Webhooks.DNSResolverURL != "" || c.Webhooks.Alert.From != "" || s.store.DatabaseURL != "postgres://cp@db/cp" {
		t.Fatalf("settings = %+v", s)
	}
}

// TestAlertSettings: the sender and the mail service's key are all alert
// mail needs (operator copies and the SMTP server are optional); copies or
// a server without a sender are a mistake.
func TestAlertSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": t.TempDir()}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(base)
		maps.Copy(m, extra)
		return m
	}
	s, err := load(with(map[string]string{"WEBHOOK_ALERT_EMAIL_FROM": "idn@example.com", "MAILER_API_KEY": "mail-key"}))
	if err != nil {
		t.Fatalf("sender and mailer key alone: %v", err)
	}
	if a := s.server.Webhooks.Alert; a.From != "idn@example.com" || len(a.To) != 0 || a.SMTPAddr != "" || a.SMTPPassword != "mail-key" {
		t.Fatalf("alert = %+v", a)
	}
	if _, err := load(with(nil)); err != nil {
		t.Fatalf("no alert settings: %v", err)
	}
	for _, extra := range []map[string]string{{"WEBHOOK_ALERT_EMAIL_TO": "ops@example.com"}, {"WEBHOOK_ALERT_SMTP_ADDR": "mail.example:587"}} {
		if _, err := load(with(extra)); err == nil || !strings.Contains(err.Error(), "need WEBHOOK_ALERT_EMAIL_FROM") {
			t.Fatalf("%v without a sender: %v", extra, err)
		}
	}
}

func TestLocalGeneratesSecretsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vars := map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": dir}
	a, err := load(vars)
	if err != nil {
		t.Fatal(err)
	}
	b, err := load(vars)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.server.JWTSecret) != string(b.server.JWTSecret) || string(a.server.Webhooks.SecretKey) != string(b.server.Webhooks.SecretKey) || len(a.server.Webhooks.SecretKey) != 32 {
		t.Fatal("local secrets changed between starts")
	}
	for _, name := range []string{"jwt_secret", "webhook_secret_encryption_key"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", name, fi, err)
		}
	}
	if !a.server.InsecureLocalhostCookie || a.server.Auth.Origins[0] != "http://localhost:8787" || a.store.SQLitePath != filepath.Join(dir, "controlplane.db") ||
		a.server.PublicURL != "" || a.addr != "127.0.0.1:8787" {
		t.Fatalf("local settings = %+v", a)
	}
}

// TestHelpAndVersionReadNoConfiguration: -h and --version answer with a
// configuration that serve would refuse, and write nothing to stderr.
func TestHelpAndVersionReadNoConfiguration(t *testing.T) {
	t.Parallel()
	broken := env(map[string]string{"ENVIRONMENT": "nowhere", "JWT_SECRET": "x"})
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"usage: controlplane [command] [flags]", "serve", "(the default)", "-version", "Without a command, controlplane runs serve",
			"CONTROLPLANE_ADDR", "(default 127.0.0.1:8787)", "LOG_FORMAT", "CONTROLPLANE_METRICS_TOKEN", "DATABASE_URL", "IDN_TEST_SEED_TOKEN", "MAILER_API_KEY"}},
		{[]string{"--help"}, []string{"usage: controlplane [command] [flags]"}},
		{[]string{"serve", "-h"}, []string{"usage: controlplane serve [flags]", "JWT_SECRET", "BLOCKCHAIN_MODE"}},
		{[]string{"serve", "--help"}, []string{"usage: controlplane serve [flags]"}},
		{[]string{"--version"}, []string{"controlplane " + buildinfo.Version() + "\n"}},
		{[]string{"-version"}, []string{"controlplane " + buildinfo.Version() + "\n"}},
		{[]string{"serve", "--version"}, []string{"controlplane " + buildinfo.Version() + "\n"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(context.Background(), tt.args, broken, &stdout, &stderr); code != 0 || stderr.Len() > 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			for _, want := range tt.want {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"serv"}, `controlplane: unknown command "serv" (see controlplane -h)`},
		{"unknown flag", []string{"--port", "1"}, "controlplane serve: flag provided but not defined: -port (see controlplane serve -h)"},
		{"stray argument is not echoed", []string{"serve", "s3cr3t"}, "controlplane serve: unexpected arguments (1)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(context.Background(), tt.args, env(nil), io.Discard, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) || strings.Contains(stderr.String(), "s3cr3t") {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// running is a control plane started through run, with its log lines.
type running struct {
	lines  chan string
	code   chan int
	cancel context.CancelFunc
}

// start runs the binary's run() with vars and returns once a log line
// contains ready, with that line.
func start(t *testing.T, vars map[string]string, ready string) (*running, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	r := &running{lines: make(chan string, 1000), code: make(chan int, 1), cancel: cancel}
	go func() {
		code := run(ctx, nil, env(vars), io.Discard, pw)
		pw.Close()
		r.code <- code
	}()
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		for range r.lines {
		}
	})
	return r, r.await(t, ready)
}

// await returns the next log line that contains want.
func (r *running) await(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("log ended before a line with %q", want)
			}
			if strings.Contains(line, want) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line with %q", want)
		}
	}
}

// stop ends the run and returns its exit status.
func (r *running) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.code:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
		return -1
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestRunServesHealthMetricsAndRequestLog runs the binary on a temporary
// SQLite directory: the health routes answer, /metrics serves the control
// plane's and the Go runtime's metrics to a loopback client, every request
// is a JSON log line without its path, and the shutdown is logged.
func TestRunServesHealthMetricsAndRequestLog(t *testing.T) {
	t.Parallel()
	r, line := start(t, map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": t.TempDir(), "CONTROLPLANE_ADDR": "127.0.0.1:0",
		"ENABLE_TEST_SEED_ENDPOINT": "true", "IDN_TEST_SEED_TOKEN": "tok"}, "control plane listening")
	var listening struct{ Addr, Level string }
	if err := json.Unmarshal([]byte(line), &listening); err != nil || listening.Level != "INFO" {
		t.Fatalf("listening line %q: %v", line, err)
	}
	base := "http://" + listening.Addr

	if code, body := get(t, base+"/health/live"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/health/live = %d %s", code, body)
	}
	if code, body := get(t, base+"/health/ready"); code != 200 || !strings.Contains(body, `"ready"`) || !strings.Contains(body, buildinfo.Version()) {
		t.Errorf("/health/ready = %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", base+"/v1/test/seed", strings.NewReader(`{"namespaces":["acme"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("seed: %v %v", res, err)
	}
	res.Body.Close()
	code, body := get(t, base+"/metrics")
	for _, want := range []string{`idn_controlplane_http_requests_total{method="GET",route="/health/ready",status="200"} 1`,
		`idn_controlplane_claims{status="pending"}`, "go_goroutines", "process_resident_memory_bytes"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}

	line = r.await(t, `"route":"/health/live"`)
	var request map[string]any
	if err := json.Unmarshal([]byte(line), &request); err != nil {
		t.Fatalf("request line %q is not JSON: %v", line, err)
	}
	if request["log"] != "access" || request["msg"] != "request" || request["method"] != "GET" || request["status"] != 200.0 ||
		request["request_id"] == "" || request["duration_ms"] == nil {
		t.Errorf("request line %s", line)
	}
	if line = r.await(t, `"route":"/v1/test/seed"`); strings.Contains(line, "tok") || strings.Contains(line, "acme") {
		t.Errorf("request line carries the request's secrets or body: %s", line)
	}

	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	r.await(t, "control plane shutting down")
	if line = r.await(t, "control plane stopped"); !strings.Contains(line, `"drain":"success"`) || !strings.Contains(line, `"seconds":`) {
		t.Errorf("stop line %s", line)
	}
	if _, err := http.Get(base + "/health/live"); err == nil {
		t.Error("still serving after shutdown")
	}
}

// TestBeyondLoopbackIsLogged: an address beyond loopback is served, with a
// warning naming it; LOG_FORMAT=text and LOG_LEVEL=warn shape the lines.
func TestBeyondLoopbackIsLogged(t *testing.T) {
	t.Parallel()
	r, line := start(t, map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": t.TempDir(), "CONTROLPLANE_ADDR": "0.0.0.0:0",
		"LOG_FORMAT": "text", "LOG_LEVEL": "warn"}, "beyond loopback")
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "addr=[::]:") && !strings.Contains(line, "addr=0.0.0.0:") {
		t.Errorf("warning %q", line)
	}
	code := r.stop(t)
	for line := range r.lines {
		t.Log(line)
		if strings.Contains(line, "level=INFO") {
			t.Errorf("an info line at LOG_LEVEL=warn: %s", line)
		}
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestOriginsOffTheListenPortAreLogged: a control plane moved to another
// port while its origins stay on the default one warns at start, naming
// the variables; origins on its port, or elsewhere (behind a proxy), do not.
func TestOriginsOffTheListenPortAreLogged(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the subtests listen on it, one after the other
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		name string
		vars map[string]string
		warn []string
	}{
		{"defaults on another port", nil, []string{"ALLOWED_ORIGINS", "WEBAUTHN_ALLOWED_ORIGINS"}},
		{"origins on the port", map[string]string{"ALLOWED_ORIGINS": "http://localhost:" + port, "WEBAUTHN_ALLOWED_ORIGINS": "http://localhost:" + port}, nil},
		{"passkeys left behind", map[string]string{"ALLOWED_ORIGINS": "http://localhost:" + port}, []string{"WEBAUTHN_ALLOWED_ORIGINS"}},
		{"behind a proxy", map[string]string{"ALLOWED_ORIGINS": "https://idn.example", "WEBAUTHN_ALLOWED_ORIGINS": "https://idn.example"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": t.TempDir(), "CONTROLPLANE_ADDR": "127.0.0.1:0", "LOG_FORMAT": "text"}
			for k, v := range c.vars {
				vars[k] = v
			}
			if c.vars != nil {
				vars["CONTROLPLANE_ADDR"] = addr
			}
			r, _ := start(t, vars, "control plane listening")
			r.stop(t)
			var warned []string
			for line := range r.lines {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, "ORIGIN_FORBIDDEN") {
					_, v, _ := strings.Cut(line, "variable=")
					v, _, _ = strings.Cut(v, " ")
					warned = append(warned, v)
				}
			}
			if strings.Join(warned, ",") != strings.Join(c.warn, ",") {
				t.Errorf("warned about %v, want %v", warned, c.warn)
			}
		})
	}
}

// TestTracingOnIsLogged: with an OTLP endpoint set, the start-up log says
// tracing is on and where spans go, without the endpoint's user
// information or query.
func TestTracingOnIsLogged(t *testing.T) {
	t.Parallel()
	r, line := start(t, map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": t.TempDir(), "CONTROLPLANE_ADDR": "127.0.0.1:0",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://user:s3cret@127.0.0.1:1/v1/traces?token=s3cret"}, "tracing on")
	if !strings.Contains(line, `"endpoint":"http://127.0.0.1:1/v1/traces"`) || strings.Contains(line, "s3cret") {
		t.Errorf("start-up line %s", line)
	}
	r.stop(t)
}

// TestDataDirectoryIsPrivate runs a local control plane in a fresh data
// directory: the directory is 0700 and every file in it (generated
// secrets, the database and its -wal and -shm files) is 0600.
func TestDataDirectoryIsPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	r, _ := start(t, map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": dir, "CONTROLPLANE_ADDR": "127.0.0.1:0"}, "control plane listening")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	names := map[string]bool{}
	for _, f := range files {
		fi, err := f.Info()
		if err != nil {
			t.Fatal(err)
		}
		names[f.Name()] = true
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f.Name(), fi.Mode().Perm())
		}
	}
	for _, want := range []string{"jwt_secret", "webhook_secret_encryption_key", "controlplane.db", "controlplane.db-wal", "controlplane.db-shm"} {
		if !names[want] {
			t.Errorf("%s missing from the data directory (have %v)", want, names)
		}
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestListenFailureIsExitOne: a failure after the configuration was
// accepted is one line and exit status 1.
func TestListenFailureIsExitOne(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := run(context.Background(), nil, env(map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": t.TempDir(),
		"CONTROLPLANE_ADDR": "127.0.0.1:notaport"}), io.Discard, &stderr)
	if code != 1 || !strings.HasPrefix(stderr.String(), "controlplane serve: listen on 127.0.0.1:notaport") || strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestLocalSecretReadableByOthersIsTightened: a secret copied in by hand
// with mode 0644 is made 0600 when it is read.
func TestLocalSecretReadableByOthersIsTightened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "jwt_secret")
	if err := os.WriteFile(path, []byte(strings.Repeat("s", 44)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := localSecret(dir, "jwt_secret")
	if err != nil || got != strings.Repeat("s", 44) {
		t.Fatalf("localSecret = %q, %v", got, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}
