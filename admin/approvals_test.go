package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRelayedOwnerCannotLiftApprovals: the control plane relays the
// owner's changes, but it cannot be trusted to release a held call, so a
// relayed change that drops an approval rule is refused. Adding one is
// not, and the operator with the admin token may lift one.
func TestRelayedOwnerCannotLiftApprovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantStatus(t, e.do("POST", "/api/admin/connections",
		`{"id":"bank","base_url":"https://bank.example","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"bank_stored_secret_0001"},
		"approval_routes":["POST /v1/payments","DELETE /v1/accounts/*"]}`, withToken...), 201, "")
	relayed := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(OwnerContext(context.Background()), "PATCH", "/api/admin/connections/bank", strings.NewReader(body))
		req.Host, req.RemoteAddr = "localhost", "127.0.0.1:0"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		return rec
	}
	for name, body := range map[string]string{
		"clear the routes":         `{"approval_routes":null}`,
		"drop one route":           `{"approval_routes":["DELETE /v1/accounts/*"]}`,
		"respell a route narrower": `{"approval_routes":["POST /v1/payments/eur","DELETE /v1/accounts/*"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			before := e.state()
			if rec := relayed(body); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "ADMIN_TOKEN_REQUIRED") {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if e.state() != before {
				t.Fatal("the store changed")
			}
		})
	}
	if rec := relayed(`{"approval_routes":["POST /v1/payments","DELETE /v1/accounts/*","POST /v1/transfers"]}`); rec.Code != http.StatusOK {
		t.Fatalf("adding a rule over the relay: %d %s", rec.Code, rec.Body)
	}
	wantStatus(t, e.do("PATCH", "/api/admin/connections/bank", `{"approval_routes":null}`, withToken...), 200, "")
}
