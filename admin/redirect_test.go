package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLoopbackCannotRedirectSecrets: any process on the gateway host is a
// loopback client, agents included. Without the admin token it may read,
// list, test and create connections with secrets it supplies. It may not
// change where or how a stored secret is sent. Otherwise it would point a
// connection at its own listener and receive the credential with the next
// signed request. With the token, or as the owner over pairing, it may.
func TestLoopbackCannotRedirectSecrets(t *testing.T) {
	t.Parallel()
	const attacker = "http://127.0.0.1:9"
	e := newEnv(t, nil)
	wantStatus(t, e.do("POST", "/api/admin/connections",
		`{"id":"gh","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"ghp_stored_secret_0001","spare":"spare-secret-0001"}}`), 201, "")
	wantStatus(t, e.do("POST", "/api/admin/credential-variables", `{"key":"SHARED","value":"variable-secret-0001"}`), 201, "")
	wantStatus(t, e.do("POST", "/api/admin/connections",
		`{"id":"tpl","base_url":"https://api.example.com","auth_mode":"bearer","auth_secret_key":"k","secrets":{"k":"{{SHARED}}"}}`, withToken...), 201, "")

	wantStatus(t, e.do("POST", "/api/admin/connections",
		`{"id":"m2m","base_url":"https://graph.microsoft.com","auth_mode":"oauth2_client_credentials","oauth_token_url":"https://login.microsoftonline.com/t/oauth2/v2.0/token",`+
			`"oauth_client_id":"app","auth_secret_key":"client_secret","secrets":{"client_secret":"client-secret-0001"}}`), 201, "")
	refused := []struct{ name, method, path, body string }{
		{"patch_oauth_token_url_sends_the_client_secret_to_attacker", "PATCH", "/api/admin/connections/m2m", `{"oauth_token_url":"` + attacker + `/token"}`},
		{"patch_auth_mode_from_oauth_to_bearer_sends_the_client_secret_upstream", "PATCH", "/api/admin/connections/m2m", `{"auth_mode":"bearer"}`},
		{"patch_base_url_to_attacker_listener", "PATCH", "/api/admin/connections/gh", `{"base_url":"` + attacker + `"}`},
		{"patch_base_url_hidden_among_harmless_fields", "PATCH", "/api/admin/connections/gh", `{"name":"GitHub","base_url":"` + attacker + `"}`},
		{"patch_auth_mode_to_query_param", "PATCH", "/api/admin/connections/gh", `{"auth_mode":"query_param"}`},
		{"patch_auth_header_name", "PATCH", "/api/admin/connections/gh", `{"auth_header_name":"X-Echo"}`},
		{"patch_auth_query_param", "PATCH", "/api/admin/connections/gh", `{"auth_query_param":"logged"}`},
		{"patch_auth_prefix", "PATCH", "/api/admin/connections/gh", `{"auth_prefix":"Token "}`},
		{"patch_auth_secret_key_to_other_secret", "PATCH", "/api/admin/connections/gh", `{"auth_secret_key":"spare"}`},
		{"patch_path_prefix", "PATCH", "/api/admin/connections/gh", `{"path_prefix":"/redirect"}`},
		{"patch_protocol", "PATCH", "/api/admin/connections/gh", `{"protocol":"mcp"}`},
		{"patch_mcp_endpoint_to_attacker", "PATCH", "/api/admin/connections/gh", `{"mcp_endpoint":"` + attacker + `/mcp"}`},
		{"patch_allow_upstream_cookies_hands_session_cookies_to_agents", "PATCH", "/api/admin/connections/gh", `{"allow_upstream_cookies":true}`},
		{"rotate_secrets", "POST", "/api/admin/connections/gh/rotate", `{"secrets":{"token":"attacker-chosen-0001"}}`},
		{"create_referencing_stored_variable", "POST", "/api/admin/connections",
			`{"id":"steal","base_url":"` + attacker + `","auth_mode":"bearer","auth_secret_key":"k","secrets":{"k":"{{SHARED}}"}}`},
		{"put_referenced_variable", "POST", "/api/admin/credential-variables", `{"key":"SHARED","value":"attacker-value-0001"}`},
	}
	for _, row := range refused {
		t.Run(row.name, func(t *testing.T) {
			before := e.state()
			r := e.do(row.method, row.path, row.body)
			wantStatus(t, r, http.StatusUnauthorized, "ADMIN_TOKEN_REQUIRED")
			if !strings.Contains(string(r.Body), "admin token") {
				t.Errorf("message does not say what is needed: %s", r.Body)
			}
			if after := e.state(); after != before {
				t.Fatalf("store changed without the token:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	allowed := []struct {
		name, method, path, body string
		status                   int
	}{
		{"get", "GET", "/api/admin/connections/gh", "", 200},
		{"list", "GET", "/api/admin/connections", "", 200},
		{"patch_name_and_status", "PATCH", "/api/admin/connections/gh", `{"name":"GitHub","status":"disabled"}`, 200},
		{"patch_base_url_to_its_own_value", "PATCH", "/api/admin/connections/gh", `{"base_url":"https://api.github.com","status":"active"}`, 200},
		{"create_with_own_secret", "POST", "/api/admin/connections",
			`{"id":"mine","base_url":"` + attacker + `","auth_mode":"bearer","auth_secret_key":"k","secrets":{"k":"my-own-secret-0001"}}`, 201},
		{"put_unreferenced_variable", "POST", "/api/admin/credential-variables", `{"key":"UNUSED","value":"unused-value-0001"}`, 201},
		{"delete_own_connection", "DELETE", "/api/admin/connections/mine", "", 204},
	}
	for _, row := range allowed {
		t.Run(row.name, func(t *testing.T) {
			wantStatus(t, e.do(row.method, row.path, row.body), row.status, "")
		})
	}

	t.Run("patch_base_url_with_token", func(t *testing.T) {
		wantStatus(t, e.do("PATCH", "/api/admin/connections/gh", `{"base_url":"https://api.github.example"}`, withToken...), 200, "")
	})
	t.Run("put_referenced_variable_with_token", func(t *testing.T) {
		wantStatus(t, e.do("POST", "/api/admin/credential-variables", `{"key":"SHARED","value":"rotated-value-0001"}`, withToken...), 200, "")
	})
	t.Run("patch_base_url_as_owner_over_pairing", func(t *testing.T) {
		req := httptest.NewRequestWithContext(OwnerContext(context.Background()), "PATCH", "/api/admin/connections/gh",
			strings.NewReader(`{"base_url":"https://api.github.com"}`))
		req.Host, req.RemoteAddr = "localhost", "127.0.0.1:0"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("owner's change: %d %s", rec.Code, rec.Body)
		}
	})
	e.assertNoSecrets("ghp_stored_secret_0001", "variable-secret-0001", "rotated-value-0001")
}
