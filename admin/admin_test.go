package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/kit/testlog"
)

const testToken = "admin-token-0123456789abcdef"

// withToken are the headers of a request that presents the admin token,
// for e.do: what changing where or how a stored secret is sent needs.
var withToken = []string{"Authorization", "Bearer " + testToken}

// env is one admin handler on a real SQLite vault, with a transcript of
// every response and log line for secret scanning.
type env struct {
	t       *testing.T
	vault   *credvault.Vault
	handler *Handler
	dir     string
	logs    *testlog.Buffer

	mu         sync.Mutex
	transcript []string
}

// testExtensions stand in for a gateway's. The MCP settings are accepted
// as the admin API wrote them; the gateway's tests check them. An MCP
// connection without a transport gets the default one, as the gateway
// gives it. mcp_endpoint and mcp_transport are part of the secret's route.
var testExtensions = credvault.Extensions{
	Check: func(c *credvault.Connection) error {
		if c.Protocol == credvault.ProtocolMCP && c.Extensions["mcp_transport"] == nil {
			if c.Extensions == nil {
				c.Extensions = map[string]json.RawMessage{}
			}
			c.Extensions["mcp_transport"] = json.RawMessage(`"streamable_http"`)
		}
		return nil
	},
	SecretRoute: []string{"mcp_endpoint", "mcp_transport"},
}

// testVault is a vault in a temporary directory, with testExtensions.
func testVault(t testing.TB) *credvault.Vault {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.GenerateMasterKey()
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: key, PollInterval: -1, Extensions: testExtensions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(); st.Close() })
	return v
}

func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	dir := t.TempDir()
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, sqlitestore.DefaultFileName))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.GenerateMasterKey()
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: key, Logger: logger, PollInterval: -1, Extensions: testExtensions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(); st.Close() })
	access, err := NewAccess(AccessConfig{AccessOptions: AccessOptions{Token: testToken}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	// The routes' own answers are under test; the guard's are in
	// guard_test.go and TestChecksNeedAGuard.
	cfg := Config{Vault: v, Access: access, CatalogFile: filepath.Join(dir, "service-catalog.json"), Logger: logger, InsecureUnguardedChecks: true}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, vault: v, handler: h, dir: dir, logs: logs}
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %s", r.Body)
	}
	return m
}

// do sends a request from a loopback peer with JSON content type.
func (e *env) do(method, path, body string, hdr ...string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "http://127.0.0.1:38100"+path, rd)
	req.RemoteAddr = "127.0.0.1:50000"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	e.mu.Lock()
	var h bytes.Buffer
	rec.Result().Header.Write(&h)
	e.transcript = append(e.transcript, h.String(), rec.Body.String())
	e.mu.Unlock()
	return resp{Status: rec.Code, Header: rec.Result().Header, Body: rec.Body.Bytes()}
}

// assertNoSecrets scans every response, header and log line so far.
func (e *env) assertNoSecrets(secrets ...string) {
	e.t.Helper()
	e.mu.Lock()
	all := strings.Join(e.transcript, "\n") + e.logs.String()
	e.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(all, s) {
			e.t.Fatalf("secret %q appears in a response or log line", s)
		}
	}
}

func (e *env) state() string {
	b, _ := json.Marshal([]any{e.vault.Connections(), e.vault.Variables()})
	cat, _ := os.ReadFile(filepath.Join(e.dir, "service-catalog.json"))
	return string(b) + string(cat)
}

func wantStatus(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	if code == "" {
		return
	}
	m := r.json(t)
	if m["code"] != code || m["request_id"] == "" || m["timestamp"] == "" || m["error"] == "" {
		t.Fatalf("envelope = %s, want code %s", r.Body, code)
	}
}
