package admin

import (
	"fmt"
	"net"

	"testing"
)

// TestNoSecretInAnyOutput drives every route, on success and failure
// paths, with distinctive secret values, then scans every response body,
// response header and log line for them.
func TestNoSecretInAnyOutput(t *testing.T) {
	t.Parallel()
	const (
		qsSecret  = "QS_SECRET_9d2f61/+&"
		hdrSecret = "HDR_SECRET_a41c07"
		varSecret = "VAR_SECRET_c3e915"
		badSecret = "BAD_SECRET_77aa01"
	)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	echo := upstream(t, "X-API-Key", hdrSecret)
	e := newEnv(t, nil)

	e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"V","value":%q}`, varSecret))
	e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"q","base_url":%q,"auth_mode":"query_param","auth_secret_key":"k","secrets":{"k":%q}}`, closed, qsSecret))
	e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"h","base_url":%q,"auth_mode":"header_key","auth_secret_key":"k","secrets":{"k":%q,"v":"{{V}}"}}`, echo.URL, hdrSecret))
	e.do("POST", "/api/admin/connections/q/test", `{"path":"/x?y=1"}`)             // upstream unreachable
	e.do("POST", "/api/admin/connections/h/test", `{"method":"POST","body":"hi"}`) // upstream echoes the credential
	e.do("GET", "/api/admin/connections", "")
	e.do("GET", "/api/admin/connections/h", "")
	e.do("GET", "/api/admin/credential-variables", "")
	e.do("POST", "/api/admin/connections/h/rotate", fmt.Sprintf(`{"secrets":{"k":"%s\u0007"}}`, badSecret)) // refused: control char
	e.do("POST", "/api/admin/connections/h/rotate", fmt.Sprintf(`{"secrets":{"k":"{{%s"}}`, badSecret))     // refused: malformed template
	e.do("POST", "/api/admin/connections", fmt.Sprintf(`{"id":"bad","base_url":"ftp://x","auth_mode":"bearer","auth_secret_key":"k","secrets":{"k":%q}}`, badSecret))
	e.do("POST", "/api/admin/credential-variables", fmt.Sprintf(`{"key":"BAD-KEY","value":%q}`, badSecret))
	e.do("DELETE", "/api/admin/credential-variables/V", "")
	e.do("DELETE", "/api/admin/credential-variables/V?force=true", "")
	e.do("POST", "/api/admin/connections/h/test", `{}`) // after the forced delete (k is a literal, so the probe still runs)
	e.do("PATCH", "/api/admin/connections/h", `{"auth_mode":"query_param"}`)
	e.do("POST", "/api/admin/connections/h/test", `{}`)
	e.do("DELETE", "/api/admin/connections/h", "")

	if last, _ := e.vault.Connection("q"); last.LastTest == nil || last.LastTest.OK {
		t.Fatalf("unreachable probe not recorded as failed: %+v", last.LastTest)
	}
	e.assertNoSecrets(qsSecret, "QS_SECRET_9d2f61%2F%2B%26", hdrSecret, varSecret, badSecret)
	if len(e.transcript) < 30 || e.logs.String() == "" {
		t.Fatal("scan had nothing to look at")
	}
}
