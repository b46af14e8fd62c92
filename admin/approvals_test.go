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

// TestRelayedOwnerCannotLiftSubjectApprovals: a subject's rules are holds
// as the connection's are; dropping one over the relay, or a whole
// subject, is refused, while respelling the subject's case lifts nothing.
func TestRelayedOwnerCannotLiftSubjectApprovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	wantStatus(t, e.do("POST", "/api/admin/connections",
		`{"id":"bank","base_url":"https://bank.example","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"bank_stored_secret_0001"},
		"approval_subjects":{"alice":{"approval_routes":["POST /v1/payments","DELETE /v1/accounts/*"]}}}`, withToken...), 201, "")
	relayed := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(OwnerContext(context.Background()), "PATCH", "/api/admin/connections/bank", strings.NewReader(body))
		req.Host, req.RemoteAddr = "localhost", "127.0.0.1:0"
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		return rec
	}
	for name, body := range map[string]string{
		"clear the subjects":                   `{"approval_subjects":null}`,
		"drop the subject":                     `{"approval_subjects":{"bob":{"approval_routes":["POST /v1/payments"]}}}`,
		"drop one of its routes":               `{"approval_subjects":{"alice":{"approval_routes":["DELETE /v1/accounts/*"]}}}`,
		"move its route to another subject":    `{"approval_subjects":{"alice":{"approval_routes":["DELETE /v1/accounts/*"]},"bob":{"approval_routes":["POST /v1/payments"]}}}`,
		"attack: respell the subject and drop": `{"approval_subjects":{"Alice":{"approval_routes":["POST /v1/payments"]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			before := e.state()
			rec := relayed(body)
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "ADMIN_TOKEN_REQUIRED") || !strings.Contains(rec.Body.String(), "approval_subjects") {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if e.state() != before {
				t.Fatal("the store changed")
			}
		})
	}
	for name, body := range map[string]string{
		"add a subject":          `{"approval_subjects":{"alice":{"approval_routes":["POST /v1/payments","DELETE /v1/accounts/*"]},"bob":{"approval_routes":["POST /v1/payments"]}}}`,
		"respell the subject":    `{"approval_subjects":{"Alice":{"approval_routes":["POST /v1/payments","DELETE /v1/accounts/*"]},"bob":{"approval_routes":["POST /v1/payments"]}}}`,
		"move a subject's route": `{"approval_routes":["POST /v1/payments"],"approval_subjects":{"Alice":{"approval_routes":["POST /v1/payments","DELETE /v1/accounts/*"]},"bob":{"approval_routes":["POST /v1/payments"]}}}`,
	} {
		if rec := relayed(body); rec.Code != http.StatusOK {
			t.Fatalf("%s over the relay: %d %s", name, rec.Code, rec.Body)
		}
	}
	wantStatus(t, e.do("PATCH", "/api/admin/connections/bank", `{"approval_subjects":null}`, withToken...), 200, "")
}

// TestApprovalSubjectsValidation: a malformed subject entry is refused
// with the field named, a misspelt member included, since dropping it
// would leave a call unheld.
func TestApprovalSubjectsValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	create := func(subjects string) resp {
		return e.do("POST", "/api/admin/connections", `{"id":"bank","base_url":"https://bank.example","auth_mode":"bearer","auth_secret_key":"token",
			"secrets":{"token":"bank_stored_secret_0001"},"approval_subjects":`+subjects+`}`, withToken...)
	}
	for name, row := range map[string]struct{ body, want string }{
		"misspelt member":             {`{"alice":{"approval_route":["POST /pay"]}}`, `unknown field \"approval_route\"`},
		"wrong type":                  {`{"alice":["POST /pay"]}`, "wrong JSON type"},
		"tools on an http connection": {`{"alice":{"approval_tools":["pay*"]}}`, `approval_tools applies to \"mcp\" connections only`},
		"two spellings":               {`{"alice":{"approval_routes":["POST /a"]},"ALICE":{"approval_routes":["POST /b"]}}`, "are the same subject"},
		"bad route":                   {`{"alice":{"approval_routes":["pay"]}}`, "must be \\\"METHOD /path-glob\\\""},
		"no rule":                     {`{"alice":{}}`, "has no rule"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := create(row.body)
			if rec.Status != http.StatusBadRequest || !strings.Contains(string(rec.Body), `"field":"approval_subjects"`) || !strings.Contains(string(rec.Body), row.want) {
				t.Fatalf("%d %s", rec.Status, rec.Body)
			}
		})
	}
	rec := create(`{"alice":{"approval_routes":["POST /v1/payments"]}}`)
	if rec.Status != http.StatusCreated || !strings.Contains(string(rec.Body), `"approval_subjects":{"alice":{"approval_routes":["POST /v1/payments"]}}`) {
		t.Fatalf("%d %s", rec.Status, rec.Body)
	}
}
