package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/testlog"
	"github.com/jackc/pgx/v5"
)

// fleetDatabase creates a database of the test's own in the server named
// by IDN_TEST_POSTGRES_URL, dropped when the test ends.
func fleetDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("IDN_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("IDN_TEST_POSTGRES_URL is unset but CI=true: PostgreSQL tests must run in CI (see .ci/run)")
		}
		t.Skip("PostgreSQL tests skipped: IDN_TEST_POSTGRES_URL is unset (bash .ci/run starts a server)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "gateway_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}

// TestFleetCommandLine: with GATEWAY_DATABASE_URL, the command-line tool
// of any host works on the fleet's store, not on its data directory.
func TestFleetCommandLine(t *testing.T) {
	t.Parallel()
	dbURL := fleetDatabase(t)
	a, b := newCLIRunner(t), newCLIRunner(t)
	a.env["GATEWAY_DATABASE_URL"], b.env["GATEWAY_DATABASE_URL"] = dbURL, dbURL
	if r := a.run("add", "--id", "gh", "--base-url", "https://api.github.com", "--auth-mode", "bearer",
		"--auth-secret-key", "token", "--secret", "token=ghp_fleet_secret_1"); r.code != 0 {
		t.Fatalf("add on host a: %+v", r)
	}
	if r := b.run("list"); r.code != 0 || !strings.Contains(r.stdout, "gh") {
		t.Fatalf("list on host b: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(a.env["GATEWAY_DATA_DIR"], "gateway.db")); err == nil {
		t.Error("the tool wrote gateway.db in the data directory instead of the fleet's store")
	}
	if r := b.run("pair", "--status"); r.code != 0 || !strings.Contains(r.stdout, "paired: no") || !strings.Contains(r.stdout, "running: no") {
		t.Fatalf("pair --status of the fleet: %+v", r)
	}
	other := newCLIRunner(t)
	other.env["GATEWAY_DATABASE_URL"] = dbURL
	other.env["GATEWAY_MASTER_KEY"] = "AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	if r := other.run("list"); r.code == 0 || !strings.Contains(r.stderr, "master key") {
		t.Fatalf("list with another master key: %+v", r)
	}
	a.assertNoSecrets("ghp_fleet_secret_1")
	b.assertNoSecrets("ghp_fleet_secret_1")
}

// fleetReplica is one gateway serve process of a fleet.
type fleetReplica struct {
	addr, token string
	cmd         *exec.Cmd
	logs        *testlog.Buffer
}

// startReplica runs gateway serve on the fleet's database, with a data
// directory of its own; connection "up" is served unsigned, so that no
// control plane is needed.
func startReplica(t *testing.T, dbURL, key, name string) *fleetReplica {
	t.Helper()
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	r := &fleetReplica{addr: freeAddr(t), logs: &testlog.Buffer{}}
	dataDir := t.TempDir()
	r.cmd = exec.Command(bin, "serve")
	r.cmd.Env = append(os.Environ(),
		"GATEWAY_ADDR="+r.addr, "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key, "GATEWAY_DATABASE_URL="+dbURL,
		"GATEWAY_REPLICA_NAME="+name, "GATEWAY_ALLOW_UNSIGNED_CONNECTIONS=up",
		"IDN_REGISTRY_URL=http://127.0.0.1:1", "IDN_SERVICE_API_KEY=idn_sk_fleet_test")
	r.cmd.Stderr = r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	waitFor(t, name+" to listen", func() bool {
		resp, err := http.Get("http://" + r.addr + "/health/live")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	tok, err := os.ReadFile(filepath.Join(dataDir, gateway.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	r.token = strings.TrimSpace(string(tok))
	return r
}

func (r *fleetReplica) admin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+r.addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFleetServesOneStore runs two gateway serve processes on one
// PostgreSQL database: a connection added through one replica's admin
// API is served by the other within a second, and a rotation through the
// other reaches the first as fast.
func TestFleetServesOneStore(t *testing.T) {
	t.Parallel()
	dbURL := fleetDatabase(t)
	key, _ := credvault.GenerateMasterKey()
	seen := make(chan string, 16)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Header.Get("Authorization"):
		default:
		}
	}))
	defer upstream.Close()
	a := startReplica(t, dbURL, key.Encode(), "gw-a")
	b := startReplica(t, dbURL, key.Encode(), "gw-b")

	// servedBy waits until replica r forwards /proxy/up with token.
	servedBy := func(r *fleetReplica, token string) bool {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			resp, err := http.Get("http://" + r.addr + "/proxy/up/x")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && <-seen == "Bearer "+token {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	status, body := a.admin(t, "POST", "/api/admin/connections", `{"id":"up","base_url":"`+upstream.URL+`","auth_mode":"bearer",`+
		`"auth_secret_key":"token","secrets":{"token":"fleet-token-one"}}`)
	if status != http.StatusCreated {
		t.Fatalf("create on a: %d %s", status, body)
	}
	if !servedBy(b, "fleet-token-one") {
		t.Fatal("replica b does not serve the connection added on a within a second")
	}
	if status, body := b.admin(t, "POST", "/api/admin/connections/up/rotate", `{"secrets":{"token":"fleet-token-two"}}`); status != http.StatusOK {
		t.Fatalf("rotate on b: %d %s", status, body)
	}
	if !servedBy(a, "fleet-token-two") {
		t.Fatal("replica a does not serve b's rotation within a second")
	}
	for _, r := range []*fleetReplica{a, b} {
		if logs := r.logs.String(); strings.Contains(logs, "fleet-token") || strings.Contains(logs, key.Encode()) {
			t.Errorf("a replica's logs leak a secret:\n%s", logs)
		}
	}
}
