package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/idnhq/idn/identity"
)

// TestTargetBinding: a signed request is checked against the scheme of the
// connection and the Host it names; an absolute-form target naming another
// origin than the server's listen address is refused (RFC 9112 §3.2.2), so
// a request an agent signed for https://evil.example, or for
// http://evil.example:9999 (which Go's server would take as Host), cannot
// be replayed here.
func TestTargetBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	e.seed(map[string]any{"namespaces": []string{"gateway-one"}})
	own := strings.TrimPrefix(e.ts.URL, "http://")
	const path = "/v1/namespaces/gateway-one"
	rows := []struct {
		name        string
		signedFor   string
		requestLine string
		wantStatus  int
		wantCode    string
	}{
		{"absolute_form_https_target_replayed_over_plain_http", "https://evil.example" + path,
			"GET https://evil.example" + path + " HTTP/1.1", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_https_own_authority_over_plain_http", "https://" + own + path,
			"GET https://" + own + path + " HTTP/1.1", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_with_userinfo", "http://" + own + path,
			"GET http://user@" + own + path + " HTTP/1.1", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_https_on_a_session_route", "https://evil.example/v1/services",
			"GET https://evil.example/v1/services HTTP/1.1", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_foreign_authority_replaces_host", "http://evil.example:9999" + path,
			"GET http://evil.example:9999" + path + " HTTP/1.1", 400, "REQUEST_TARGET_FOREIGN"},
		{"signed_for_https_sent_origin_form_over_plain_http", "https://" + own + path,
			"GET " + path + " HTTP/1.1", 403, "AUTH_SIGNATURE_INVALID"},
		{"absolute_form_naming_this_server_is_accepted", "http://" + own + path,
			"GET http://" + own + path + " HTTP/1.1", 200, ""},
		{"origin_form_is_accepted", "http://" + own + path, "GET " + path + " HTTP/1.1", 200, ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", row.signedFor, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.agent.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			status, code := sendRequestLine(t, e.ts.Listener.Addr().String(), row.requestLine, own, req.Header)
			if status != row.wantStatus || code != row.wantCode {
				t.Fatalf("answer = %d %s, want %d %s", status, code, row.wantStatus, row.wantCode)
			}
		})
	}
}

// sendRequestLine sends a bodiless request with exactly this request line and
// returns the status and error code of the answer.
func sendRequestLine(t *testing.T, addr, requestLine, host string, h http.Header) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s\r\nHost: %s\r\nConnection: close\r\n", requestLine, host)
	if err := h.Write(&b); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Code
}
