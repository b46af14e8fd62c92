package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy/mcpsettings"
)

const (
	secretToken = "ghp_SECRET_token_7f3a9c"
	secretVar   = "VARSECRET_51be2d"
	secretNew   = "ROTATED_SECRET_e88c01"
)

func upstream(t *testing.T, header, want string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(header) != want {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "echo %s", r.Header.Get(header)) // an upstream that echoes the credential
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestConnectionRoutes(t *testing.T) {
	t.Parallel()
	up := upstream(t, "Authorization", "Bearer "+secretToken)
	e := newEnv(t, nil)

	r := e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"gh","name":"GitHub","base_url":%q,"auth_mode":"bearer","auth_secret_key":"token","path_prefix":"/api","secrets":{"token":%q,"spare":"x{{SPARE}}"}}`, up.URL, secretToken), withToken...)
	wantStatus(t, r, http.StatusCreated, "")
	c := r.json(t)
	if c["id"] != "gh" || c["secret_version"] != 1.0 || c["status"] != "active" || fmt.Sprint(c["credential_keys"]) != "[spare token]" || c["secrets"] != nil {
		t.Fatalf("created = %s", r.Body)
	}
	if strings.Contains(string(r.Body), "0001-01-01") || strings.Contains(string(r.Body), "last_rotated_at") {
		t.Fatalf("zero time rendered: %s", r.Body)
	}
	wantStatus(t, e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"gh","base_url":%q,"auth_mode":"bearer","auth_secret_key":"t","secrets":{"t":"tok-secret-1"}}`, up.URL)), http.StatusConflict, "CONNECTION_EXISTS")

	r = e.do("GET", "/api/admin/connections", "")
	if r.Status != 200 || !strings.HasPrefix(string(r.Body), `[{"id":"gh"`) {
		t.Fatalf("list = %d %s", r.Status, r.Body)
	}
	wantStatus(t, e.do("GET", "/api/admin/connections/gh", ""), 200, "")
	for _, req := range [][3]string{
		{"GET", "/api/admin/connections/nope", ""},
		{"PATCH", "/api/admin/connections/nope", `{"name":"x"}`},
		{"POST", "/api/admin/connections/nope/rotate", `{"secrets":{"token":"x"}}`},
		{"POST", "/api/admin/connections/nope/test", ""},
		{"POST", "/api/admin/connections/nope/discover", ""},
	} {
		wantStatus(t, e.do(req[0], req[1], req[2], withToken...), 404, "CONNECTION_NOT_FOUND")
	}

	// PATCH changes only named fields; null clears optional ones.
	r = e.do("PATCH", "/api/admin/connections/gh", `{"name":"Renamed","status":"disabled","path_prefix":null,"rotation_interval_days":30}`, withToken...)
	wantStatus(t, r, 200, "")
	c = r.json(t)
	if c["name"] != "Renamed" || c["status"] != "disabled" || c["path_prefix"] != nil || c["base_url"] != up.URL || c["next_rotation_due_at"] == nil {
		t.Fatalf("patched = %s", r.Body)
	}
	wantStatus(t, e.do("PATCH", "/api/admin/connections/gh", `{"status":"active"}`), 200, "")
	r = e.do("PATCH", "/api/admin/connections/gh", `{"allow_upstream_cookies":true}`, withToken...)
	if wantStatus(t, r, 200, ""); r.json(t)["allow_upstream_cookies"] != true {
		t.Fatalf("allow_upstream_cookies not kept: %s", r.Body)
	}

	// test probes the upstream with the injected credential.
	r = e.do("POST", "/api/admin/connections/gh/test", `{"method":"GET","path":"/user","headers":{"Accept":"application/json"}}`)
	wantStatus(t, r, 200, "")
	if res := r.json(t); res["ok"] != true || res["status"] != 200.0 || res["latency_ms"] == nil {
		t.Fatalf("test = %s", r.Body)
	}
	if got, _ := e.vault.Connection("gh"); got.LastTest == nil || !got.LastTest.OK {
		t.Fatal("last_test not recorded")
	}

	// rotate: atomic, null deletes, rotated_by from idn-subject.
	r = e.do("POST", "/api/admin/connections/gh/rotate", fmt.Sprintf(`{"secrets":{"token":%q,"spare":null},"reason":"compromised"}`, secretNew), "idn-subject", "alice", withToken[0], withToken[1])
	wantStatus(t, r, 200, "")
	c = r.json(t)
	hist, _ := c["rotation_history"].([]any)
	if c["secret_version"] != 2.0 || fmt.Sprint(c["credential_keys"]) != "[token]" || len(hist) != 1 ||
		hist[0].(map[string]any)["by"] != "alice" || hist[0].(map[string]any)["reason"] != "compromised" {
		t.Fatalf("rotated = %s", r.Body)
	}
	r = e.do("POST", "/api/admin/connections/gh/test", "")
	if res := r.json(t); res["ok"] != false || res["status"] != 401.0 {
		t.Fatalf("test after rotation to a credential the upstream refuses = %s", r.Body)
	}

	wantStatus(t, e.do("POST", "/api/admin/connections/gh/discover", ""), 400, "VALIDATION_ERROR")
	wantStatus(t, e.do("DELETE", "/api/admin/connections/gh", ""), http.StatusNoContent, "")
	wantStatus(t, e.do("DELETE", "/api/admin/connections/gh", ""), 404, "CONNECTION_NOT_FOUND")
	wantStatus(t, e.do("PUT", "/api/admin/connections/gh", `{}`), 405, "METHOD_NOT_ALLOWED")
	wantStatus(t, e.do("GET", "/api/admin/nothing", ""), 404, "NOT_FOUND")
	e.assertNoSecrets(secretToken, secretNew)
}

func TestInlineVariableReferenceThroughAdmin(t *testing.T) {
	t.Parallel()
	up := upstream(t, "X-API-Key", "key-"+secretVar)
	e := newEnv(t, nil)
	wantStatus(t, e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"svc","base_url":%q,"auth_mode":"header_key","auth_secret_key":"k","secrets":{"k":"key-{{SHARED}}"}}`, up.URL), withToken...), 201, "")
	r := e.do("POST", "/api/admin/connections/svc/test", `{}`)
	if res := r.json(t); res["ok"] != false || !strings.Contains(fmt.Sprint(res["error"]), "SHARED") {
		t.Fatalf("test with undefined variable = %s", r.Body)
	}
	wantStatus(t, e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"SHARED","value":%q,"created_by_subject":"body-subject"}`, secretVar), "idn-subject", "header-subject", withToken[0], withToken[1]), 201, "")
	r = e.do("POST", "/api/admin/connections/svc/test", `{}`)
	if res := r.json(t); res["ok"] != true {
		t.Fatalf("test with inline variable = %s", r.Body)
	}
	e.assertNoSecrets(secretVar)
}

func TestVariableRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"OPENAI_KEY","value":%q,"created_by_subject":"body-subject"}`, secretVar), "idn-subject", "header-subject")
	wantStatus(t, r, 201, "")
	if v := r.json(t); v["key"] != "OPENAI_KEY" || v["created_by_subject"] != "header-subject" || v["value"] != nil {
		t.Fatalf("created = %s", r.Body)
	}
	// A subject beyond ASCII arrives as an RFC 9651 display string and is
	// stored as the subject it carries; a malformed one is refused.
	r = e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"ZOE_KEY","value":%q}`, secretVar), "idn-subject", `%"Zo%c3%ab"`)
	if v := r.json(t); r.Status != 201 || v["created_by_subject"] != "Zoë" {
		t.Fatalf("created by an encoded subject = %d %s", r.Status, r.Body)
	}
	wantStatus(t, e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"BAD_KEY","value":%q}`, secretVar), "idn-subject", `%"Zo%C3%AB"`), 400, "VALIDATION_ERROR")
	wantStatus(t, e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"OPENAI_KEY","value":%q}`, secretVar+"2")), 200, "")
	r = e.do("GET", "/api/admin/credential-variables", "")
	if r.Status != 200 || !strings.Contains(string(r.Body), `"key":"OPENAI_KEY"`) {
		t.Fatalf("list = %s", r.Body)
	}
	wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"oa","base_url":"https://api.openai.com","auth_mode":"bearer","auth_secret_key":"k","secrets":{"k":"{{OPENAI_KEY}}"}}`, withToken...), 201, "")
	r = e.do("DELETE", "/api/admin/credential-variables/OPENAI_KEY", "")
	wantStatus(t, r, http.StatusConflict, "VARIABLE_IN_USE")
	if fmt.Sprint(r.json(t)["connections"]) != "[oa]" {
		t.Fatalf("in-use envelope = %s", r.Body)
	}
	wantStatus(t, e.do("DELETE", "/api/admin/credential-variables/OPENAI_KEY?force=true", ""), http.StatusNoContent, "")
	wantStatus(t, e.do("DELETE", "/api/admin/credential-variables/OPENAI_KEY", ""), 404, "VARIABLE_NOT_FOUND")
	e.assertNoSecrets(secretVar)
}

func TestCatalogRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.do("GET", "/api/admin/service-catalog", "")
	wantStatus(t, r, 200, "")
	cat, err := decodeCatalog(r.Body, e.vault.ValidateConnection)
	if err != nil {
		t.Fatalf("default catalog does not validate: %v", err)
	}
	ids := map[string]bool{}
	for _, s := range cat.Services {
		ids[s.ID] = true
	}
	for _, want := range []string{"github", "openai", "anthropic", "slack", "stripe", "linear", "notion"} {
		if !ids[want] {
			t.Errorf("default catalog lacks %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "service-catalog.json")); err != nil {
		t.Fatalf("default catalog not written on first use: %v", err)
	}
	next := `{"schema_version":1,"services":[{"id":"acme","name":"Acme","base_url":"https://api.acme.test","auth_mode":"query_param","auth_query_param":"key","env_var":"ACME_KEY"}]}`
	wantStatus(t, e.do("PUT", "/api/admin/service-catalog", next), 200, "")
	r = e.do("GET", "/api/admin/service-catalog", "")
	if !strings.Contains(string(r.Body), `"id":"acme"`) || strings.Contains(string(r.Body), `"github"`) {
		t.Fatalf("catalog after PUT = %s", r.Body)
	}
	e2 := newEnv(t, func(c *Config) { c.CatalogFile = "" })
	wantStatus(t, e2.do("GET", "/api/admin/service-catalog", ""), 404, "NOT_FOUND")
}

func TestDiscoverAndGuardHooks(t *testing.T) {
	t.Parallel()
	denied := errors.New("claim missing")
	var guarded []string
	e := newEnv(t, func(c *Config) {
		c.GuardCheck = func(r *http.Request, conn *credvault.Connection) error {
			guarded = append(guarded, r.URL.Path)
			switch r.Header.Get("X-Test-Guard") {
			case "plain":
				return denied
			case "coded":
				return codedErr{}
			}
			return nil
		}
		c.Discover = func(ctx context.Context, conn *credvault.Connection, refresh string) (mcpsettings.Discovery, error) {
			if refresh == "auto" {
				return mcpsettings.Discovery{}, errors.New("dial tcp: upstream down")
			}
			if conn.ID == "gone" { // deleted while the discovery ran
				return mcpsettings.Discovery{}, fmt.Errorf("lookup %s: %w", conn.ID, credvault.ErrNotFound)
			}
			// The server's name says what the route asked for.
			return mcpsettings.Discovery{ServerName: conn.ID + " " + refresh, Tools: []mcpsettings.Tool{{Name: "a.b", InputSchema: []byte(`{"type":"object"}`)}}}, nil
		}
	})
	wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"m","protocol":"mcp","base_url":"http://127.0.0.1:9","mcp_endpoint":"/mcp","mcp_transport":"http"}`), 201, "")
	r := e.do("PATCH", "/api/admin/connections/m", `{"mcp_expose_resources":true,"mcp_expose_prompts":true}`)
	if wantStatus(t, r, 200, ""); r.json(t)["mcp_expose_resources"] != true || r.json(t)["mcp_expose_prompts"] != true {
		t.Fatalf("mcp_expose_* not kept: %s", r.Body)
	}
	r = e.do("POST", "/api/admin/connections/m/discover", "")
	wantStatus(t, r, 200, "")
	if m := r.json(t); m["server_name"] != "m force" {
		t.Fatalf("discover default refresh = %s", r.Body)
	}
	wantStatus(t, e.do("POST", "/api/admin/connections/m/discover?refresh=auto", ""), 502, "UPSTREAM_ERROR")
	wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"gone","protocol":"mcp","base_url":"http://127.0.0.1:9","mcp_endpoint":"/mcp","mcp_transport":"http"}`), 201, "")
	wantStatus(t, e.do("POST", "/api/admin/connections/gone/discover", ""), 404, "CONNECTION_NOT_FOUND")
	wantStatus(t, e.do("POST", "/api/admin/connections/m/discover?refresh=sometimes", ""), 400, "VALIDATION_ERROR")
	wantStatus(t, e.do("POST", "/api/admin/connections/m/discover", "", "X-Test-Guard", "plain"), 403, "ADMIN_FORBIDDEN")
	r = e.do("POST", "/api/admin/connections/m/test", `{}`, "X-Test-Guard", "coded")
	wantStatus(t, r, 403, "AUTH_SIGNATURE_INVALID")
	if msg := r.json(t)["error"]; msg != errcode.AuthSignatureInvalid.Message() {
		t.Fatalf("a coded guard refusal answers error %q, want the code's message for people %q", msg, errcode.AuthSignatureInvalid.Message())
	}
	if len(guarded) != 5 {
		t.Fatalf("guard ran %d times: %v", len(guarded), guarded)
	}
	e2 := newEnv(t, nil)
	e2.do("POST", "/api/admin/connections", `{"id":"m","protocol":"mcp","base_url":"http://127.0.0.1:9"}`)
	wantStatus(t, e2.do("POST", "/api/admin/connections/m/discover", ""), 501, "DISCOVERY_UNAVAILABLE")
}

// codedErr is a guard's refusal as Go errors read: package and code
// first, for logs, never for the answer.
type codedErr struct{}

func (codedErr) Error() string      { return "proxy: AUTH_SIGNATURE_INVALID: signature does not verify" }
func (codedErr) Code() errcode.Code { return errcode.AuthSignatureInvalid }

// TestBadInput sends named bad requests to every writing route; each must
// answer an error envelope and leave the store and catalog unchanged.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.do("GET", "/api/admin/service-catalog", "") // materialize the catalog file
	wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"gh","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"tok-secret-1"}}`), 201, "")
	wantStatus(t, e.do("POST", "/api/admin/credential-variables", `{"key":"K","value":"v"}`), 201, "")
	huge := `{"id":"big","name":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}`
	okConn := func(mut string) string {
		return `{"id":"new1","base_url":"https://api.example.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"tok-secret-1"}` + mut + `}`
	}
	rows := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"create_malformed_json", "POST", "/api/admin/connections", `{"id":`, 400, "VALIDATION_ERROR"},
		{"create_not_an_object", "POST", "/api/admin/connections", `["id"]`, 400, "VALIDATION_ERROR"},
		{"create_trailing_data", "POST", "/api/admin/connections", okConn("") + `{}`, 400, "VALIDATION_ERROR"},
		{"create_empty_body", "POST", "/api/admin/connections", " ", 400, "VALIDATION_ERROR"},
		{"create_invalid_id", "POST", "/api/admin/connections", `{"id":"../../etc/passwd","base_url":"https://a.b","auth_mode":"bearer","auth_secret_key":"t","secrets":{"t":"x"}}`, 400, "VALIDATION_ERROR"},
		{"create_missing_id", "POST", "/api/admin/connections", `{"base_url":"https://a.b","auth_mode":"bearer","auth_secret_key":"t","secrets":{"t":"x"}}`, 400, "VALIDATION_ERROR"},
		{"create_unknown_auth_mode", "POST", "/api/admin/connections", okConn(`,"auth_mode":"basic"`), 400, "VALIDATION_ERROR"},
		{"create_base_url_not_http", "POST", "/api/admin/connections", okConn(`,"base_url":"file:///etc/passwd"`), 400, "VALIDATION_ERROR"},
		{"create_base_url_userinfo", "POST", "/api/admin/connections", okConn(`,"base_url":"https://u:p@api.example.com"`), 400, "VALIDATION_ERROR"},
		{"create_base_url_no_host", "POST", "/api/admin/connections", okConn(`,"base_url":"https://"`), 400, "VALIDATION_ERROR"},
		{"create_http_without_auth_secret_key", "POST", "/api/admin/connections", okConn(`,"auth_secret_key":null`), 400, "VALIDATION_ERROR"},
		{"create_unknown_field_typo", "POST", "/api/admin/connections", okConn(`,"auth_secretkey":"x"`), 400, "VALIDATION_ERROR"},
		{"create_read_only_field", "POST", "/api/admin/connections", okConn(`,"secret_version":7`), 400, "VALIDATION_ERROR"},
		{"create_wrong_type", "POST", "/api/admin/connections", okConn(`,"rotation_interval_days":"30"`), 400, "VALIDATION_ERROR"},
		{"create_secret_not_string", "POST", "/api/admin/connections", okConn(`,"secrets":{"token":1}`), 400, "VALIDATION_ERROR"},
		{"create_malformed_template", "POST", "/api/admin/connections", okConn(`,"secrets":{"token":"{{BROKEN"}`), 400, "VALIDATION_ERROR"},
		{"create_oversized_body", "POST", "/api/admin/connections", huge, 413, "REQUEST_BODY_TOO_LARGE"},
		{"patch_malformed_json", "PATCH", "/api/admin/connections/gh", `{"name":`, 400, "VALIDATION_ERROR"},
		{"patch_id", "PATCH", "/api/admin/connections/gh", `{"id":"other"}`, 400, "VALIDATION_ERROR"},
		{"patch_secrets", "PATCH", "/api/admin/connections/gh", `{"secrets":{"token":"x"}}`, 400, "VALIDATION_ERROR"},
		{"patch_unknown_auth_mode", "PATCH", "/api/admin/connections/gh", `{"auth_mode":"digest"}`, 400, "VALIDATION_ERROR"},
		{"patch_bad_base_url", "PATCH", "/api/admin/connections/gh", `{"base_url":"ftp://x"}`, 400, "VALIDATION_ERROR"},
		{"patch_clear_required_base_url", "PATCH", "/api/admin/connections/gh", `{"base_url":null}`, 400, "VALIDATION_ERROR"},
		{"patch_clear_auth_secret_key", "PATCH", "/api/admin/connections/gh", `{"auth_secret_key":null}`, 400, "VALIDATION_ERROR"},
		{"patch_bad_status", "PATCH", "/api/admin/connections/gh", `{"status":"paused"}`, 400, "VALIDATION_ERROR"},
		{"patch_oversized_body", "PATCH", "/api/admin/connections/gh", huge, 413, "REQUEST_BODY_TOO_LARGE"},
		{"rotate_malformed_json", "POST", "/api/admin/connections/gh/rotate", `{"secrets":`, 400, "VALIDATION_ERROR"},
		{"rotate_empty_secrets", "POST", "/api/admin/connections/gh/rotate", `{"secrets":{}}`, 400, "VALIDATION_ERROR"},
		{"rotate_deletes_auth_secret", "POST", "/api/admin/connections/gh/rotate", `{"secrets":{"token":null}}`, 400, "VALIDATION_ERROR"},
		{"rotate_unknown_field", "POST", "/api/admin/connections/gh/rotate", `{"secret":{"token":"x"}}`, 400, "VALIDATION_ERROR"},
		{"rotate_control_chars_header_injection", "POST", "/api/admin/connections/gh/rotate", `{"secrets":{"token":"x\r\nX-Evil: 1"}}`, 400, "VALIDATION_ERROR"},
		{"rotate_oversized_body", "POST", "/api/admin/connections/gh/rotate", huge, 413, "REQUEST_BODY_TOO_LARGE"},
		{"test_malformed_json", "POST", "/api/admin/connections/gh/test", `{"path":`, 400, "VALIDATION_ERROR"},
		{"test_path_to_other_host", "POST", "/api/admin/connections/gh/test", `{"path":"//evil.example/x"}`, 400, "VALIDATION_ERROR"},
		{"test_path_traversal", "POST", "/api/admin/connections/gh/test", `{"path":"/a/../../admin"}`, 400, "VALIDATION_ERROR"},
		{"test_bad_method", "POST", "/api/admin/connections/gh/test", `{"method":"GET /x"}`, 400, "VALIDATION_ERROR"},
		{"test_header_injection", "POST", "/api/admin/connections/gh/test", `{"headers":{"X-A":"b\r\nX-Evil: 1"}}`, 400, "VALIDATION_ERROR"},
		{"test_oversized_body", "POST", "/api/admin/connections/gh/test", huge, 413, "REQUEST_BODY_TOO_LARGE"},
		{"variable_malformed_json", "POST", "/api/admin/credential-variables", `{"key":`, 400, "VALIDATION_ERROR"},
		{"variable_invalid_key", "POST", "/api/admin/credential-variables", `{"key":"BAD-KEY","value":"v"}`, 400, "VALIDATION_ERROR"},
		{"variable_empty_value", "POST", "/api/admin/credential-variables", `{"key":"K2","value":""}`, 400, "VALIDATION_ERROR"},
		{"variable_nested_reference", "POST", "/api/admin/credential-variables", `{"key":"K2","value":"{{K}}"}`, 400, "VALIDATION_ERROR"},
		{"variable_oversized_body", "POST", "/api/admin/credential-variables", huge, 413, "REQUEST_BODY_TOO_LARGE"},
		{"variable_delete_bad_force", "DELETE", "/api/admin/credential-variables/K?force=maybe", "", 400, "VALIDATION_ERROR"},
		{"discover_bad_refresh", "POST", "/api/admin/connections/gh/discover?refresh=never", "", 400, "VALIDATION_ERROR"},
		{"catalog_malformed_json", "PUT", "/api/admin/service-catalog", `{"schema_version":1,`, 400, "VALIDATION_ERROR"},
		{"catalog_wrong_schema_version", "PUT", "/api/admin/service-catalog", `{"schema_version":2,"services":[]}`, 400, "VALIDATION_ERROR"},
		{"catalog_missing_services", "PUT", "/api/admin/service-catalog", `{"schema_version":1}`, 400, "VALIDATION_ERROR"},
		{"catalog_invalid_id", "PUT", "/api/admin/service-catalog", `{"schema_version":1,"services":[{"id":"a b","name":"A","base_url":"https://a.b","auth_mode":"bearer"}]}`, 400, "VALIDATION_ERROR"},
		{"catalog_unknown_auth_mode", "PUT", "/api/admin/service-catalog", `{"schema_version":1,"services":[{"id":"a","name":"A","base_url":"https://a.b","auth_mode":"magic"}]}`, 400, "VALIDATION_ERROR"},
		{"catalog_bad_base_url", "PUT", "/api/admin/service-catalog", `{"schema_version":1,"services":[{"id":"a","name":"A","base_url":"javascript:alert(1)","auth_mode":"bearer"}]}`, 400, "VALIDATION_ERROR"},
		{"catalog_duplicate_id", "PUT", "/api/admin/service-catalog", `{"schema_version":1,"services":[{"id":"a","name":"A","base_url":"https://a.b","auth_mode":"bearer"},{"id":"a","name":"B","base_url":"https://a.b","auth_mode":"bearer"}]}`, 400, "VALIDATION_ERROR"},
		{"catalog_unknown_field", "PUT", "/api/admin/service-catalog", `{"schema_version":1,"services":[],"extra":1}`, 400, "VALIDATION_ERROR"},
		{"catalog_oversized_body", "PUT", "/api/admin/service-catalog", huge, 413, "REQUEST_BODY_TOO_LARGE"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			before := e.state()
			wantStatus(t, e.do(row.method, row.path, row.body, withToken...), row.status, row.code)
			if after := e.state(); after != before {
				t.Fatalf("store changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestChecksNeedAGuard: the zero Config refuses test and discover without
// a GuardCheck, so that a stolen admin token alone cannot make the gateway
// send a stored credential upstream; InsecureUnguardedChecks lifts it.
func TestChecksNeedAGuard(t *testing.T) {
	t.Parallel()
	up := upstream(t, "Authorization", "Bearer "+secretToken)
	tests := []struct {
		name      string
		insecure  bool
		path      string
		wantCode  string
		wantCalls bool
	}{
		{"stolen_token_tests_the_credential", false, "/api/admin/connections/gh/test", "ADMIN_FORBIDDEN", false},
		{"stolen_token_discovers_with_the_credential", false, "/api/admin/connections/m/discover", "ADMIN_FORBIDDEN", false},
		{"insecure_unguarded_test", true, "/api/admin/connections/gh/test", "", true},
		{"insecure_unguarded_discover", true, "/api/admin/connections/m/discover", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			discovered := false
			e := newEnv(t, func(c *Config) {
				c.InsecureUnguardedChecks = tt.insecure
				c.Discover = func(context.Context, *credvault.Connection, string) (mcpsettings.Discovery, error) {
					discovered = true
					return mcpsettings.Discovery{Tools: []mcpsettings.Tool{}}, nil
				}
			})
			wantStatus(t, e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"gh","base_url":%q,"auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":%q}}`, up.URL, secretToken), withToken...), 201, "")
			wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"m","protocol":"mcp","base_url":"http://127.0.0.1:9"}`, withToken...), 201, "")
			r := e.do("POST", tt.path, `{}`, withToken...)
			if tt.wantCode != "" {
				wantStatus(t, r, 403, tt.wantCode)
			} else {
				wantStatus(t, r, 200, "")
			}
			got, _ := e.vault.Connection("gh")
			if called := discovered || got.LastTest != nil; called != tt.wantCalls {
				t.Errorf("credential used = %v, want %v", called, tt.wantCalls)
			}
		})
	}
}
