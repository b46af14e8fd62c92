package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
)

// TestCheckConnection: Config.CheckConnection refuses a connection before
// it is stored, on create and on an update that changes its service, with
// the answer it returns; an update that leaves the service alone is not
// checked.
func TestCheckConnection(t *testing.T) {
	var checked []string
	e := newEnv(t, func(c *Config) {
		c.CheckConnection = func(_ context.Context, conn *credvault.Connection) error {
			checked = append(checked, conn.ID+"/"+conn.ServiceSlug())
			if conn.ServiceSlug() == "blocked" {
				return apierror.Coded(errcode.ServiceAPIKeyMissing, "no key for blocked").With("settings", []string{"IDN_SERVICE_API_KEY"})
			}
			return nil
		}
	})
	r := e.do("POST", "/api/admin/connections", `{"id":"gh","service":"blocked","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"token-1234"}}`)
	wantStatus(t, r, http.StatusConflict, "SERVICE_API_KEY_MISSING")
	if m := r.json(t); m["error"] != "no key for blocked" || m["settings"] == nil {
		t.Fatalf("refusal = %s", r.Body)
	}
	if len(e.vault.Connections()) != 0 {
		t.Fatal("the refused connection was stored")
	}
	wantStatus(t, e.do("POST", "/api/admin/connections", `{"id":"gh","service":"github","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"token-1234"}}`), http.StatusCreated, "")
	wantStatus(t, e.do("PATCH", "/api/admin/connections/gh", `{"name":"GitHub"}`), http.StatusOK, "")
	wantStatus(t, e.do("PATCH", "/api/admin/connections/gh", `{"service":"blocked"}`), http.StatusConflict, "SERVICE_API_KEY_MISSING")
	if c, _ := e.vault.Connection("gh"); c.ServiceSlug() != "github" {
		t.Fatalf("the refused update changed the service to %q", c.ServiceSlug())
	}
	wantStatus(t, e.do("PATCH", "/api/admin/connections/gh", `{"service":null}`), http.StatusOK, "")
	want := []string{"gh/blocked", "gh/github", "gh/blocked", "gh/gh"}
	if len(checked) != len(want) {
		t.Fatalf("checked %q, want %q", checked, want)
	}
	for i := range want {
		if checked[i] != want[i] {
			t.Fatalf("checked %q, want %q", checked, want)
		}
	}
}
