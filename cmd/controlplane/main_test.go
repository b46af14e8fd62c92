package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadSettingsListsEveryProblem(t *testing.T) {
	_, err := loadSettings(env(map[string]string{
		"ENVIRONMENT":                "production",
		"ADAPTER_PROVIDER":           "postgres",
		"JWT_SECRET":                 "short",
		"MAX_PENDING_AUTHORIZATIONS": "-1",
		"BLOCKCHAIN_MODE":            "queue",
		"ENABLE_TEST_SEED_ENDPOINT":  "true",
		"IDN_TEST_SEED_TOKEN":        "tok",
		"ALLOWED_ORIGINS":            "not an origin",
	}))
	if err == nil {
		t.Fatal("accepted a broken configuration")
	}
	for _, want := range []string{"DATABASE_URL is required", "JWT_SECRET must be at least 32", "WEBHOOK_SECRET_ENCRYPTION_KEY is required",
		"WEBAUTHN_ALLOWED_ORIGINS is required", "MAX_PENDING_AUTHORIZATIONS must be a positive integer", "CONTROLPLANE_PUBLIC_URL is required unless ENVIRONMENT=local", "BLOCKCHAIN_MODE=queue needs a registry backend",
		"ENABLE_TEST_SEED_ENDPOINT=true needs ENVIRONMENT local or test", "ALLOWED_ORIGINS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "short") {
		t.Error("error echoes a secret value")
	}
}

func TestLoadSettingsProduction(t *testing.T) {
	s, err := loadSettings(env(map[string]string{
		"ENVIRONMENT":                        "production",
		"ADAPTER_PROVIDER":                   "postgres",
		"DATABASE_URL":                       "postgres://cp@db/cp",
		"JWT_SECRET":                         strings.Repeat("j", 40),
		"WEBHOOK_SECRET_ENCRYPTION_KEY":      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"WEBAUTHN_ALLOWED_ORIGINS":           "https://dash.example",
		"PENDING_AUTHORIZATION_EXPIRY_HOURS": "48",
		"ENABLE_TEST_SEED_ENDPOINT":          "true",
		"IDN_TEST_SEED_TOKEN":                "tok",
	}))
	if err == nil || !strings.Contains(err.Error(), "ENABLE_TEST_SEED_ENDPOINT") {
		t.Fatalf("seed endpoint in production: %v", err)
	}
	s, err = loadSettings(env(map[string]string{
		"ENVIRONMENT":                          "production",
		"ADAPTER_PROVIDER":                     "postgres",
		"DATABASE_URL":                         "postgres://cp@db/cp",
		"JWT_SECRET":                           strings.Repeat("j", 40),
		"WEBHOOK_SECRET_ENCRYPTION_KEY":        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"WEBAUTHN_ALLOWED_ORIGINS":             "https://dash.example",
		"PENDING_AUTHORIZATION_EXPIRY_HOURS":   "48",
		"CONTROLPLANE_PUBLIC_URL":              "https://idn.example/",
		"MAX_PENDING_AUTHORIZATIONS_PER_AGENT": "3",
		"CONTROLPLANE_MAX_INFLIGHT_BODY_BYTES": "1048576",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != ":8787" || s.server.PendingExpiry != 48*time.Hour || s.server.MaxPendingPerAgent != 3 || s.server.MaxPendingClaims != 20 ||
		s.server.MaxInflightBodyBytes != 1<<20 ||
		s.server.MaxAPIKeys != 5 || s.server.TestSeedToken != "" ||
		s.server.InsecureLocalhostCookie || len(s.server.Webhooks.SecretKey) != 32 || s.server.Auth.Origins[0] != "https://dash.example" ||
		s.server.Webhooks.Registry.Mode != "disabled" || s.server.Auth.ChallengeExpiry != time.Hour || s.server.Webhooks.MaxPerService != 5 || s.server.Webhooks.FailureThreshold != 10 ||
		s.server.Webhooks.RetryWindow != 24*time.Hour || s.server.Webhooks.AllowPrivateTargets || s.server.Webhooks.DNSResolverURL != "" || s.server.Webhooks.Alert.From != "" {
		t.Fatalf("settings = %+v", s)
	}
}

func TestLocalGeneratesSecretsOnce(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": dir}
	a, err := loadSettings(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadSettings(env(vars))
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
		a.server.PublicURL != "" {
		t.Fatalf("local settings = %+v", a)
	}
}

// TestServeHealthAndShutdown runs the binary's server on SQLite, checks
// /health and the seed endpoint, and shuts it down through its context.
func TestServeHealthAndShutdown(t *testing.T) {
	s, err := loadSettings(env(map[string]string{"ENVIRONMENT": "test", "IDN_DATA_DIR": t.TempDir(),
		"JWT_SECRET": strings.Repeat("j", 32), "WEBHOOK_SECRET_ENCRYPTION_KEY": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"WEBAUTHN_ALLOWED_ORIGINS": "http://localhost:8787", "ENABLE_TEST_SEED_ENDPOINT": "true", "IDN_TEST_SEED_TOKEN": "tok",
		"CONTROLPLANE_PUBLIC_URL": "http://127.0.0.1:8787"}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, s, ln, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	base := "http://" + ln.Addr().String()
	res, err := http.Get(base + "/health")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	}
	res.Body.Close()
	req, _ := http.NewRequest("POST", base+"/v1/test/seed", strings.NewReader(`{"namespaces":["acme"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "tok")
	res, err = http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("seed: %v %v", res, err)
	}
	res.Body.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), env(nil), &out); code != 2 || !strings.Contains(out.String(), "JWT_SECRET is required") {
		t.Fatalf("run = %d, %q", code, out.String())
	}
}

// TestDataDirectoryIsPrivate runs a local control plane in a fresh data
// directory: the directory is 0700 and every file in it (generated
// secrets, the database and its -wal and -shm files) is 0600.
func TestDataDirectoryIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := loadSettings(env(map[string]string{"ENVIRONMENT": "local", "IDN_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, s, ln, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	res, err := http.Get("http://" + ln.Addr().String() + "/health")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	}
	res.Body.Close()
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
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestLocalSecretReadableByOthersIsTightened: a secret copied in by hand
// with mode 0644 is made 0600 when it is read.
func TestLocalSecretReadableByOthersIsTightened(t *testing.T) {
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
