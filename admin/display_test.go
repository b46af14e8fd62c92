package admin

import "testing"

// A connection's name is shown to the owner on the dashboard: a U+202E or
// another hidden character is refused when the name is written, whichever
// route writes it.
func TestConnectionNamesRefuseHiddenCharacters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, tt := range []struct{ name, method, path, body string }{
		{"create with a right-to-left override", "POST", "/api/admin/connections",
			`{"id":"gh","name":"GitHub\u202Enimda","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"token-1234"}}`},
		{"catalog template with a zero-width space", "PUT", "/api/admin/service-catalog",
			`{"schema_version":1,"services":[{"id":"acme","name":"Ac\u200Bme","base_url":"https://api.acme.test","auth_mode":"bearer"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantStatus(t, e.do(tt.method, tt.path, tt.body), 400, "VALIDATION_ERROR")
		})
	}
	wantStatus(t, e.do("POST", "/api/admin/connections",
		`{"id":"gh","name":"GitHub Zürich","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"token-1234"}}`), 201, "")
	t.Run("rename with a bidi isolate", func(t *testing.T) {
		wantStatus(t, e.do("PATCH", "/api/admin/connections/gh", `{"name":"Git\u2067Hub"}`), 400, "VALIDATION_ERROR")
	})
}
