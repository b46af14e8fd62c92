// Package gateway_test runs package gateway in front of a real control
// plane (SQLite): claims approved there, credentials from a vault, admin
// binding and readiness. It lives in the e2e module, not beside package
// gateway, so that the module a gateway user imports does not require the
// control plane's database drivers.
package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/claimcache"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
)

// stack is a gateway in front of a real control plane, with one connection
// ("conn", service "svc") whose claim for agent is approved.
type stack struct {
	gw       *httptest.Server
	agent    *identity.Identity
	mu       sync.Mutex
	upstream []string // "METHOD path" of every upstream request
}

func (s *stack) probes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.upstream...)
}

// newStack starts the stack; configure, when set, changes the gateway's
// Config before New.
func newStack(t *testing.T, configure func(*gateway.Config)) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp", "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	jwt := make([]byte, 32)
	_, _ = rand.Read(jwt)
	cp, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: jwt, TestSeedToken: "seed-token-for-tests"})
	if err != nil {
		t.Fatal(err)
	}
	cpSrv := httptest.NewServer(openapicheck.Watch(t, cp))
	t.Cleanup(cpSrv.Close)

	s := &stack{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.upstream = append(s.upstream, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)

	s.agent, _ = identity.New("agent-ns")
	seedBody, _ := json.Marshal(map[string]any{
		"namespaces": []string{"agent-ns"},
		"services":   []map[string]string{{"slug": "svc", "name": "Service", "owner": "agent-ns"}},
		"claims":     []map[string]string{{"namespace": "agent-ns", "service": "svc", "public_key": s.agent.PublicKeyString(), "status": "approved"}},
	})
	req, _ := http.NewRequest("POST", cpSrv.URL+"/v1/test/seed", bytes.NewReader(seedBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "seed-token-for-tests")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("seed: %v %v", resp, err)
	}
	var seeded struct {
		APIKeys map[string]string `json:"api_keys"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&seeded)
	resp.Body.Close()

	key, _ := credvault.GenerateMasterKey()
	cfg := gateway.Config{
		DataDir: filepath.Join(dir, "gw"), MasterKey: key, Admin: admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: cpSrv.URL, ServiceAPIKey: seeded.APIKeys["svc"],
		Claims: claimcache.Options{RefreshInterval: time.Second, TTL: 5 * time.Second},
	}
	if configure != nil {
		configure(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "conn", Service: "svc", BaseURL: up.URL,
		AuthMode: "bearer", AuthSecretKey: "t"}, map[string]string{"t": "upstream-secret"}); err != nil {
		t.Fatal(err)
	}
	s.gw = httptest.NewServer(openapicheck.Watch(t, gw))
	t.Cleanup(s.gw.Close)
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ready, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := gw.Up(ready); err != nil {
		t.Fatal(err)
	}
	return s
}

// raw sends one request exactly as written (request line, headers, body)
// and returns the status and error code of the answer.
func (s *stack) raw(t *testing.T, requestLine string, h http.Header, body string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", s.gw.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	b.WriteString(requestLine + "\r\n")
	if err := h.Write(&b); err != nil {
		t.Fatal(err)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n" + body)
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

// signedHeaders signs method url (with body) as the agent and returns the
// headers to send, Host included.
func (s *stack) signedHeaders(t *testing.T, method, url, body string) http.Header {
	t.Helper()
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, url, rb)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if err := s.agent.Sign(r, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	return r.Header
}

// TestTargetBinding: the scheme a signature is checked against comes from
// the connection and the authority from Host (or Config.Proxy.PublicAuthority);
// an absolute-form target that names another origin than the gateway's
// listen address is refused (RFC 9112 §3.2.2), so a request signed for
// https://evil.example cannot be replayed here over plain HTTP, nor one
// signed for http://evil.example:9999 (Go's server would take that
// authority as Host).
func TestTargetBinding(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	own := strings.TrimPrefix(s.gw.URL, "http://")
	rows := []struct {
		name        string
		signedFor   string // URL the agent signed
		requestLine string
		host        string
		body        string
		wantStatus  int
		wantCode    string
	}{
		{"absolute_form_https_target_replayed_over_plain_http", "https://evil.example/proxy/conn/x",
			"GET https://evil.example/proxy/conn/x HTTP/1.1", own, "", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_https_own_authority_over_plain_http", "https://" + own + "/proxy/conn/x",
			"GET https://" + own + "/proxy/conn/x HTTP/1.1", own, "", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_with_userinfo", "http://" + own + "/proxy/conn/x",
			"GET http://user@" + own + "/proxy/conn/x HTTP/1.1", own, "", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_admin_signed_check_for_other_origin", "https://evil.example/api/admin/connections/conn/test",
			"POST https://evil.example/api/admin/connections/conn/test HTTP/1.1", own, "", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_foreign_authority_replaces_host", "http://evil.example:9999/proxy/conn/x",
			"GET http://evil.example:9999/proxy/conn/x HTTP/1.1", own, "", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_other_port_of_this_gateway", "http://127.0.0.1:9/proxy/conn/x",
			"GET http://127.0.0.1:9/proxy/conn/x HTTP/1.1", own, "", 400, "REQUEST_TARGET_FOREIGN"},
		{"signed_for_https_sent_origin_form_over_plain_http", "https://" + own + "/proxy/conn/x",
			"GET /proxy/conn/x HTTP/1.1", own, "", 403, "AUTH_SIGNATURE_INVALID"},
		{"absolute_form_naming_this_gateway_is_accepted", "http://" + own + "/proxy/conn/x",
			"GET http://" + own + "/proxy/conn/x HTTP/1.1", "other.example", "", 200, ""},
		{"origin_form_is_accepted", "http://" + own + "/proxy/conn/x",
			"GET /proxy/conn/x HTTP/1.1", own, "", 200, ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			method, _, _ := strings.Cut(row.requestLine, " ")
			h := s.signedHeaders(t, method, row.signedFor, row.body)
			h.Set("Host", row.host)
			before := len(s.probes())
			status, code := s.raw(t, row.requestLine, h, row.body)
			if status != row.wantStatus || code != row.wantCode {
				t.Fatalf("answer = %d %s, want %d %s", status, code, row.wantStatus, row.wantCode)
			}
			if reached := len(s.probes()) > before; reached != (row.wantStatus == 200) {
				t.Fatalf("upstream reached = %v with status %d", reached, status)
			}
		})
	}
}

// TestAdminRebinding: a page whose name an attacker rebinds to 127.0.0.1
// reaches the gateway from a loopback peer with its own name as Host; the
// admin API and /metrics refuse it, in loopback and hybrid mode.
func TestAdminRebinding(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"loopback", "hybrid"} {
		t.Run(mode, func(t *testing.T) {
			s := newStack(t, func(c *gateway.Config) {
				c.Admin.Mode, c.Admin.Token, c.Admin.Hosts = admin.AccessMode(mode), "admin-token-0123456789abcdef", []string{"gw.example.com"}
			})
			_, port, _ := net.SplitHostPort(s.gw.Listener.Addr().String())
			for _, path := range []string{"/api/admin/connections", "/api/admin/credential-variables", "/api/admin/service-catalog", "/metrics"} {
				for _, row := range []struct {
					name string
					host string
					want int
				}{
					{"rebind_host", "rebind.evil.example:" + port, 403},
					{"localhost_as_attacker_subdomain", "localhost.evil.example:" + port, 403},
					{"loopback_ip_as_nip_io_name", "127.0.0.1.nip.io:" + port, 403},
					{"localhost_trailing_dot", "localhost.:" + port, 403},
					{"loopback_ipv4", "127.0.0.1:" + port, 200},
					{"localhost", "localhost:" + port, 200},
					{"uppercase_LOCALHOST", "LOCALHOST:" + port, 200},
					{"ipv6_loopback_literal", "[::1]:" + port, 200},
					{"listed_admin_host", "gw.example.com", 200},
				} {
					status, code := s.raw(t, "GET "+path+" HTTP/1.1", http.Header{"Host": {row.host}}, "")
					if status != row.want || (row.want == 403 && code != "ADMIN_FORBIDDEN") {
						t.Errorf("%s %s: %d %s, want %d", path, row.name, status, code, row.want)
					}
				}
			}
		})
	}
}

// TestAdminSignedCheckCoversBody: with signed admin checks on, the test
// route verifies the body it acts on against the signed content-digest.
func TestAdminSignedCheckCoversBody(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	url := s.gw.URL + "/api/admin/connections/conn/test"
	const signedBody = `{"method":"GET","path":"/signed"}`
	const evilBody = `{"method":"DELETE","path":"/attacker-chosen"}`
	evilDigest, _ := httpsig.ContentDigest(httpsig.DigestSHA256, []byte(evilBody))
	rows := []struct {
		name   string
		signed string
		sent   string
		tamper func(h http.Header)
		want   int
		probe  string
	}{
		{"signed_body", signedBody, signedBody, nil, 200, "GET /signed"},
		{"signature_made_without_body_then_body_added", "", evilBody, nil, 403, ""},
		{"signature_made_without_body_then_body_and_its_digest_added", "", evilBody,
			func(h http.Header) { h.Set("Content-Digest", evilDigest) }, 403, ""},
		{"digest_mismatch", signedBody, evilBody, nil, 403, ""},
		{"signed_digest_swapped_for_the_sent_body", signedBody, evilBody,
			func(h http.Header) { h.Set("Content-Digest", evilDigest) }, 403, ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h := s.signedHeaders(t, "POST", url, row.signed)
			h.Set("Host", strings.TrimPrefix(s.gw.URL, "http://"))
			h.Set("Content-Type", "application/json")
			if row.tamper != nil {
				row.tamper(h)
			}
			before := len(s.probes())
			status, code := s.raw(t, "POST /api/admin/connections/conn/test HTTP/1.1", h, row.sent)
			if status != row.want {
				t.Fatalf("answer = %d %s, want %d", status, code, row.want)
			}
			got := strings.Join(s.probes()[before:], ",")
			if got != row.probe {
				t.Fatalf("upstream saw %q, want %q", got, row.probe)
			}
		})
	}
}

// TestPublicAuthority: with Config.Proxy.PublicAuthority set, signatures are
// checked against that authority whatever Host a request names, so one
// made for another host with the same path cannot be replayed here by
// naming that host.
func TestPublicAuthority(t *testing.T) {
	t.Parallel()
	s := newStack(t, func(c *gateway.Config) { c.Proxy.PublicAuthority = "gw.example.com:8443" })
	own := strings.TrimPrefix(s.gw.URL, "http://")
	rows := []struct {
		name        string
		signedFor   string
		requestLine string
		host        string
		wantStatus  int
		wantCode    string
	}{
		{"signed_for_public_authority_any_host", "http://gw.example.com:8443/proxy/conn/x", "GET /proxy/conn/x HTTP/1.1", own, 200, ""},
		{"signed_for_other_host_replayed_with_its_host", "http://evil.example/proxy/conn/x", "GET /proxy/conn/x HTTP/1.1", "evil.example", 403, "AUTH_SIGNATURE_INVALID"},
		{"signed_for_listener_address_not_the_public_authority", "http://" + own + "/proxy/conn/x", "GET /proxy/conn/x HTTP/1.1", own, 403, "AUTH_SIGNATURE_INVALID"},
		{"absolute_form_naming_other_host", "http://evil.example/proxy/conn/x", "GET http://evil.example/proxy/conn/x HTTP/1.1", "gw.example.com:8443", 400, "REQUEST_TARGET_FOREIGN"},
		{"absolute_form_naming_public_authority", "http://gw.example.com:8443/proxy/conn/x", "GET http://gw.example.com:8443/proxy/conn/x HTTP/1.1", own, 200, ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h := s.signedHeaders(t, "GET", row.signedFor, "")
			h.Set("Host", row.host)
			status, code := s.raw(t, row.requestLine, h, "")
			if status != row.wantStatus || code != row.wantCode {
				t.Fatalf("answer = %d %s, want %d %s", status, code, row.wantStatus, row.wantCode)
			}
		})
	}
}

// Readiness includes the request path's own check, so that a gateway
// whose requests are stuck is taken out of rotation.
func TestReadinessChecksTheRequestPath(t *testing.T) {
	s := newStack(t, nil)
	resp, err := http.Get(s.gw.URL + "/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Checks map[string]string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body.Checks["requests"] != "ok" {
		t.Fatalf("/health/ready: %d %v, want 200 with requests ok", resp.StatusCode, body.Checks)
	}
}
