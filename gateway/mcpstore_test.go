package gateway_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/openapicheck"
)

// oldMCPMembers are the MCP members a connection's document held when they
// were fields of credvault.Connection, as that version wrote them.
const oldMCPMembers = `{
	"mcp_endpoint": "/mcp",
	"mcp_transport": "streamable_http",
	"mcp_tool_allowlist": ["a.*", "b.read"],
	"mcp_tool_denylist": ["a.secret"],
	"mcp_subject_tool_policies": {"bot": {"deny": ["a.write"]}, "ops": {"allow": ["b.*"]}},
	"mcp_max_tools": 5,
	"mcp_expose_resources": true,
	"mcp_expose_prompts": true,
	"mcp_discovery": {"server_name": "tools", "protocol_version": "2025-06-18", "tools": [{"name": "a.echo", "input_schema": {"type": "object"}}], "discovered_at": "2026-11-20T10:00:00Z"}
}`

// A store file written when the MCP settings were fields of the vault's
// connections opens with every setting and the last discovery in place:
// the admin API shows them as it did (the answers checked against the
// OpenAPI document), a change of another field keeps them, and the file
// still holds them after it.
func TestMCPSettingsOfAnOlderStoreFile(t *testing.T) {
	t.Parallel()
	cfg := minimalConfig(t)
	path := filepath.Join(cfg.DataDir, sqlitestore.DefaultFileName)
	writeOldConnection(t, path, cfg.MasterKey)

	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(openapicheck.Watch(t, gw))
	defer srv.Close()
	var want map[string]any
	if err := json.Unmarshal([]byte(oldMCPMembers), &want); err != nil {
		t.Fatal(err)
	}
	check := func(when string, shown map[string]any) {
		t.Helper()
		got := map[string]any{}
		for name := range want {
			got[name] = shown[name]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: MCP members (-stored +shown):\n%s", when, diff)
		}
	}
	check("GET", adminJSON(t, "GET", srv.URL+"/api/admin/connections/tools", ""))
	patched := adminJSON(t, "PATCH", srv.URL+"/api/admin/connections/tools", `{"name":"Tools renamed"}`)
	if patched["name"] != "Tools renamed" {
		t.Fatalf("PATCH: %v", patched)
	}
	check("PATCH", patched)

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var doc string
	if err := db.QueryRow(`SELECT doc FROM connections WHERE id = 'tools'`).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal([]byte(doc), &stored); err != nil {
		t.Fatal(err)
	}
	check("stored after the PATCH", stored)
}

// writeOldConnection makes the store file at path hold the MCP connection
// "tools" with oldMCPMembers in its document.
func writeOldConnection(t *testing.T, path string, key credvault.MasterKey) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Create(ctx, &credvault.Connection{ID: "tools", Name: "Tools", Protocol: credvault.ProtocolMCP,
		BaseURL: "https://mcp.example", AuthMode: credvault.AuthBearer, AuthSecretKey: "token"},
		map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	_ = v.Close()
	_ = st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var doc string
	if err := db.QueryRow(`SELECT doc FROM connections WHERE id = 'tools'`).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	// The old document: the connection's fields, then the MCP members.
	old := strings.TrimSuffix(doc, "}") + "," + strings.TrimPrefix(strings.TrimSpace(oldMCPMembers), "{")
	if !json.Valid([]byte(old)) {
		t.Fatalf("old document %s", old)
	}
	if _, err := db.Exec(`UPDATE connections SET doc = ? WHERE id = 'tools'`, old); err != nil {
		t.Fatal(err)
	}
}

// adminJSON sends an admin API request from loopback and returns the
// JSON object it answered with 200.
func adminJSON(t *testing.T, method, url, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return out
}
