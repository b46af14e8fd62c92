package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/idnhq/idn/kit/clientip"
)

func accessHandler(t *testing.T, mode AccessMode, trusted []netip.Prefix) http.Handler {
	t.Helper()
	a, err := NewAccess(AccessConfig{AccessOptions: AccessOptions{Mode: mode, Token: testToken, AllowedOrigins: []string{"https://dash.example.com"}}, TrustedProxies: trusted})
	if err != nil {
		t.Fatal(err)
	}
	return a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-May-Send-Secrets-Elsewhere", strconv.FormatBool(maySendSecretsElsewhere(r.Context())))
		w.WriteHeader(http.StatusOK)
	}))
}

// TestAccessMatrix runs every mode × peer × token × forwarding header ×
// trusted-proxy setting × Origin. The expectation is written from the
// rules, not from the code: only a loopback peer that forwards nothing
// counts as loopback (a spoofed X-Forwarded-For never makes a caller
// loopback, whoever relays it), and a foreign Origin is always refused.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	peers := map[string]string{"loopback_peer": "127.0.0.1:40000", "remote_peer": "203.0.113.9:40000", "proxy_peer": "10.0.0.1:40000"}
	tokens := map[string]string{"no_token": "", "wrong_token": "Bearer wrong-token-0000000000000", "right_token": "Bearer " + testToken}
	trustedSets := map[string][]netip.Prefix{"no_trusted_proxies": nil, "trusted_proxies": {netip.MustParsePrefix("10.0.0.0/8")}}
	origins := map[string]string{"no_origin": "", "cross_site_origin": "https://evil.example", "allowed_origin": "https://dash.example.com"}
	for _, mode := range []AccessMode{AccessHybrid, AccessLoopback, AccessToken} {
		for peerName, peer := range peers {
			for tokName, tok := range tokens {
				for _, spoof := range []bool{false, true} {
					for trustName, trusted := range trustedSets {
						for originName, origin := range origins {
							xffName := "no_xff"
							if spoof {
								xffName = "spoofed_xff_127.0.0.1"
							}
							name := strings.Join([]string{string(mode), peerName, tokName, xffName, trustName, originName}, "/")
							t.Run(name, func(t *testing.T) {
								req := httptest.NewRequest("GET", "http://127.0.0.1:38100/api/admin/connections", nil)
								req.RemoteAddr = peer
								if tok != "" {
									req.Header.Set("Authorization", tok)
								}
								if spoof {
									xff := "127.0.0.1"
									if peerName == "proxy_peer" {
										// A proxy appends the address it saw to the client's claim.
										xff = "127.0.0.1, 203.0.113.9"
									}
									req.Header.Set("X-Forwarded-For", xff)
								}
								if origin != "" {
									req.Header.Set("Origin", origin)
								}
								loopback := peerName == "loopback_peer" && !spoof
								want := expectedAccess(mode, loopback, tokName)
								if originName == "cross_site_origin" {
									want = http.StatusForbidden
								}
								rec := httptest.NewRecorder()
								accessHandler(t, mode, trusted).ServeHTTP(rec, req)
								if rec.Code != want {
									t.Fatalf("status = %d, want %d (%s)", rec.Code, want, rec.Body)
								}
								// Only the token lets a request change where a secret is sent;
								// a loopback peer alone never does.
								elevated := rec.Header().Get("X-May-Send-Secrets-Elsewhere") == "true"
								if want == http.StatusOK && originName != "cross_site_origin" && elevated != (tokName == "right_token") {
									t.Fatalf("may send secrets elsewhere = %v with %s", elevated, tokName)
								}
								if originName == "allowed_origin" && rec.Header().Get("Access-Control-Allow-Origin") != origin {
									t.Fatalf("allowed origin got no CORS header")
								}
								if originName == "cross_site_origin" && rec.Header().Get("Access-Control-Allow-Origin") != "" {
									t.Fatalf("foreign origin got a CORS header")
								}
							})
						}
					}
				}
			}
		}
	}
}

func expectedAccess(mode AccessMode, loopback bool, tok string) int {
	if tok == "wrong_token" {
		return http.StatusForbidden // in every mode, loopback or not
	}
	if mode != AccessToken && loopback {
		return http.StatusOK
	}
	if mode == AccessLoopback {
		return http.StatusForbidden
	}
	if tok == "no_token" {
		return http.StatusUnauthorized
	}
	return http.StatusOK
}

func TestAccessAttackRows(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	rows := []struct {
		name    string
		mode    AccessMode
		method  string
		peer    string
		headers map[string]string
		body    string
		want    int
		code    string
	}{
		{"trusted_proxy_relaying_real_loopback_client", AccessLoopback, "GET", "10.0.0.1:1", map[string]string{"X-Forwarded-For": "127.0.0.1"}, "", 200, ""},
		{"untrusted_remote_prepending_loopback_through_proxy_chain", AccessLoopback, "GET", "203.0.113.9:1", map[string]string{"X-Forwarded-For": "127.0.0.1, 10.0.0.1"}, "", 403, "ADMIN_FORBIDDEN"},
		{"local_reverse_proxy_without_trust_config_is_not_loopback", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"Forwarded": "for=203.0.113.9"}, "", 401, "ADMIN_UNAUTHORIZED"},
		{"local_reverse_proxy_sending_x_real_ip_is_not_loopback", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"X-Real-IP": "203.0.113.9"}, "", 401, "ADMIN_UNAUTHORIZED"},
		{"local_reverse_proxy_sending_x_real_ip_in_loopback_mode", AccessLoopback, "GET", "127.0.0.1:1", map[string]string{"X-Real-IP": "203.0.113.9"}, "", 403, "ADMIN_FORBIDDEN"},
		{"ipv6_loopback_peer", AccessLoopback, "GET", "[::1]:1", nil, "", 200, ""},
		{"ipv4_mapped_loopback_peer", AccessLoopback, "GET", "[::ffff:127.0.0.1]:1", nil, "", 200, ""},
		{"sec_fetch_site_cross_site_without_origin", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403, "ORIGIN_FORBIDDEN"},
		{"sec_fetch_site_same_site_other_port", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "same-site"}, "", 403, "ORIGIN_FORBIDDEN"},
		{"sec_fetch_site_none_typed_url", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"Sec-Fetch-Site": "none"}, "", 200, ""},
		{"null_origin_sandboxed_iframe", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"Origin": "null"}, "", 403, "ORIGIN_FORBIDDEN"},
		{"origin_prefix_trick", AccessHybrid, "GET", "127.0.0.1:1", map[string]string{"Origin": "https://dash.example.com.evil.example"}, "", 403, "ORIGIN_FORBIDDEN"},
		{"form_post_text_plain_csrf", AccessHybrid, "POST", "127.0.0.1:1", map[string]string{"Content-Type": "text/plain"}, "{}", 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"form_post_urlencoded_csrf", AccessHybrid, "POST", "127.0.0.1:1", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "a=b", 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"json_with_charset_ok", AccessHybrid, "POST", "127.0.0.1:1", map[string]string{"Content-Type": "application/json; charset=utf-8"}, "{}", 200, ""},
		{"preflight_allowed_origin_without_token", AccessToken, "OPTIONS", "203.0.113.9:1", map[string]string{"Origin": "https://dash.example.com", "Access-Control-Request-Method": "POST"}, "", 204, ""},
		{"preflight_foreign_origin", AccessToken, "OPTIONS", "203.0.113.9:1", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, "", 403, "ORIGIN_FORBIDDEN"},
		{"basic_auth_instead_of_bearer", AccessToken, "GET", "203.0.113.9:1", map[string]string{"Authorization": "Basic " + testToken}, "", 401, "ADMIN_UNAUTHORIZED"},
		{"lowercase_bearer_scheme", AccessToken, "GET", "203.0.113.9:1", map[string]string{"Authorization": "bearer " + testToken}, "", 200, ""},
		{"token_prefix_only", AccessToken, "GET", "203.0.113.9:1", map[string]string{"Authorization": "Bearer " + testToken[:10]}, "", 403, "ADMIN_FORBIDDEN"},
		{"token_with_suffix", AccessToken, "GET", "203.0.113.9:1", map[string]string{"Authorization": "Bearer " + testToken + "x"}, "", 403, "ADMIN_FORBIDDEN"},
		{"unparsable_peer_address", AccessLoopback, "GET", "garbage", nil, "", 403, "ADMIN_FORBIDDEN"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var body *strings.Reader
			if row.body != "" {
				body = strings.NewReader(row.body)
			} else {
				body = strings.NewReader("")
			}
			req := httptest.NewRequest(row.method, "http://127.0.0.1:38100/api/admin/connections", body)
			req.RemoteAddr = row.peer
			for k, v := range row.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			accessHandler(t, row.mode, trusted).ServeHTTP(rec, req)
			if rec.Code != row.want {
				t.Fatalf("status = %d, want %d (%s)", rec.Code, row.want, rec.Body)
			}
			if row.code != "" && !strings.Contains(rec.Body.String(), fmt.Sprintf(`"code":%q`, row.code)) {
				t.Fatalf("body = %s, want code %s", rec.Body, row.code)
			}
		})
	}
}

func TestNewAccessRefusesWeakConfig(t *testing.T) {
	t.Parallel()
	bad := map[string]AccessOptions{
		"hybrid_without_token":  {},
		"token_mode_short":      {Mode: AccessToken, Token: "short"},
		"unknown_mode":          {Mode: "open", Token: testToken},
		"wildcard_origin":       {Mode: AccessLoopback, AllowedOrigins: []string{"*"}},
		"origin_with_path":      {Mode: AccessLoopback, AllowedOrigins: []string{"https://a.example/x"}},
		"origin_with_userinfo":  {Mode: AccessLoopback, AllowedOrigins: []string{"https://u@a.example"}},
		"host_with_port":        {Mode: AccessLoopback, Hosts: []string{"admin.example.com:8443"}},
		"host_with_scheme":      {Mode: AccessLoopback, Hosts: []string{"https://admin.example.com"}},
		"wildcard_host":         {Mode: AccessLoopback, Hosts: []string{"*.example.com"}},
		"host_trailing_dot":     {Mode: AccessLoopback, Hosts: []string{"admin.example.com."}},
		"ipv6_host_unbracketed": {Mode: AccessLoopback, Hosts: []string{"2001:db8::7"}},
	}
	for name, opts := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := NewAccess(AccessConfig{AccessOptions: opts}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := NewAccess(AccessConfig{AccessOptions: AccessOptions{Mode: AccessLoopback}}); err != nil {
		t.Fatalf("loopback mode needs no token: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("admin.New accepted a config without Vault and Access")
	}
}

// TestHostAllowList is the DNS-rebinding defence: a page on a name the
// attacker controls, rebound to 127.0.0.1, reaches the admin API from a
// loopback peer but sends its own name as Host. Every mode refuses a Host
// that is not a loopback literal, localhost or a configured name.
func TestHostAllowList(t *testing.T) {
	t.Parallel()
	a, err := NewAccess(AccessConfig{
		AccessOptions:  AccessOptions{Mode: AccessHybrid, Token: testToken, Hosts: []string{"admin.example.com", "[2001:db8::7]"}},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	rows := []struct {
		name    string
		host    string
		peer    string
		headers map[string]string
		want    int
	}{
		{"rebind_host", "rebind.evil.example", "", nil, 403},
		{"rebind_host_with_port", "rebind.evil.example:38100", "", nil, 403},
		{"rebind_host_with_admin_token", "rebind.evil.example:38100", "", map[string]string{"Authorization": "Bearer " + testToken}, 403},
		{"localhost_as_subdomain_of_attacker", "localhost.evil.example", "", nil, 403},
		{"loopback_ip_as_subdomain_nip_io", "127.0.0.1.nip.io", "", nil, 403},
		{"loopback_ip_as_subdomain_with_port", "127.0.0.1.evil.example:38100", "", nil, 403},
		{"localhost_trailing_dot", "localhost.", "", nil, 403},
		{"localhost_trailing_dot_with_port", "localhost.:38100", "", nil, 403},
		{"listed_name_trailing_dot", "admin.example.com.", "", nil, 403},
		{"listed_name_as_prefix_of_attacker", "admin.example.com.evil.example", "", nil, 403},
		{"userinfo_in_host", "localhost:38100@evil.example", "", nil, 403},
		{"non_numeric_port", "localhost:http", "", nil, 403},
		{"empty_host", "", "", nil, 403},
		{"short_ipv4_loopback", "127.1", "", nil, 403},
		{"hex_ipv4_loopback", "0x7f.0.0.1", "", nil, 403},
		{"decimal_ipv4_loopback", "2130706433", "", nil, 403},
		{"unspecified_address", "0.0.0.0:38100", "", nil, 403},
		{"ipv6_unbracketed", "::1", "", nil, 403},
		{"ipv6_with_zone", "[::1%25lo]:38100", "", nil, 403},
		{"ipv6_not_loopback", "[2001:db8::1]:38100", "", nil, 403},
		{"ipv6_loopback", "[::1]", "", nil, 200},
		{"ipv6_loopback_with_port", "[::1]:38100", "", nil, 200},
		{"ipv6_loopback_long_form", "[0:0:0:0:0:0:0:1]:38100", "", nil, 200},
		{"ipv4_mapped_ipv6_loopback", "[::ffff:127.0.0.1]:38100", "", nil, 200},
		{"listed_ipv6_literal_other_spelling", "[2001:DB8:0::7]:8443", "", nil, 200},
		{"uppercase_LOCALHOST_is_localhost", "LOCALHOST:38100", "", nil, 200},
		{"localhost", "localhost", "", nil, 200},
		{"loopback_ipv4", "127.0.0.1", "", nil, 200},
		{"other_loopback_ipv4_with_port", "127.0.0.2:38100", "", nil, 200},
		{"listed_name_other_case_and_port", "ADMIN.example.com:443", "", nil, 200},
		{"untrusted_peer_forwarded_host_is_ignored", "rebind.evil.example", "", map[string]string{"X-Forwarded-Host": "localhost"}, 403},
		{"trusted_proxy_relays_rebind_host", "127.0.0.1:38100", "10.0.0.1:1", map[string]string{"X-Forwarded-Host": "rebind.evil.example", "X-Forwarded-For": "127.0.0.1"}, 403},
		{"trusted_proxy_relays_listed_host", "127.0.0.1:38100", "10.0.0.1:1", map[string]string{"X-Forwarded-Host": "admin.example.com", "X-Forwarded-For": "127.0.0.1"}, 200},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/admin/connections", nil)
			req.Host = row.host
			req.RemoteAddr = "127.0.0.1:40000"
			if row.peer != "" {
				req.RemoteAddr = row.peer
			}
			for k, v := range row.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != row.want {
				t.Fatalf("status = %d, want %d (%s)", rec.Code, row.want, rec.Body)
			}
			if row.want == 403 && !strings.Contains(rec.Body.String(), `"code":"ADMIN_FORBIDDEN"`) {
				t.Fatalf("body = %s, want ADMIN_FORBIDDEN", rec.Body)
			}
		})
	}
}

// TestHostAllowListEveryMode: the Host check comes before authentication,
// so neither a loopback peer nor a valid token passes a foreign Host.
func TestHostAllowListEveryMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []AccessMode{AccessHybrid, AccessLoopback, AccessToken} {
		req := httptest.NewRequest("GET", "http://rebind.evil.example:38100/api/admin/connections", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		accessHandler(t, mode, nil).ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s: status = %d, want 403", mode, rec.Code)
		}
	}
}

func FuzzHostAllowList(f *testing.F) {
	for _, s := range []string{"localhost:38100", "[::1]", "127.0.0.1.nip.io", "LOCALHOST.", "[::ffff:127.0.0.1]:1", "admin.example.com"} {
		f.Add(s)
	}
	a, err := NewAccess(AccessConfig{AccessOptions: AccessOptions{Mode: AccessLoopback, Hosts: []string{"admin.example.com"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, authority string) {
		if !a.hostAllowed(authority) {
			return
		}
		// An admitted Host names localhost, a listed name, or an address
		// that is loopback: never a name an attacker's DNS answers for.
		host, _, ok := clientip.SplitAuthority(authority)
		if !ok {
			t.Fatalf("admitted unparsable %q", authority)
		}
		if n := strings.ToLower(host); n == "localhost" || n == "admin.example.com" {
			return
		}
		addr, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if err != nil || !addr.Unmap().IsLoopback() {
			t.Fatalf("admitted %q", authority)
		}
	})
}

// Every admin request gets a decision record when a decision log is set:
// the admitted ones and the refused ones with their code and reason, the
// client address masked and the token never written.
func TestAccessDecisionRecords(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	a, err := NewAccess(AccessConfig{AccessOptions: AccessOptions{Mode: AccessHybrid, Token: testToken}, DecisionLog: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	for _, tt := range []struct {
		peer, token string
		want        int
	}{
		{"127.0.0.1:1234", "", http.StatusOK},
		{"192.0.2.7:1234", "Bearer " + testToken, http.StatusOK},
		{"192.0.2.7:1234", "Bearer wrong-token-of-some-length", http.StatusForbidden},
		{"192.0.2.7:1234", "", http.StatusUnauthorized},
	} {
		r := httptest.NewRequest("GET", "http://localhost/api/admin/connections", nil)
		r.RemoteAddr = tt.peer
		if tt.token != "" {
			r.Header.Set("Authorization", tt.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Fatalf("%s %q: %d, want %d", tt.peer, tt.token, w.Code, tt.want)
		}
	}
	got := logs.String()
	for _, want := range []string{
		`"msg":"decision","kind":"admin","outcome":"allow","method":"GET","path":"/api/admin/connections","client_ip":"127.0.0.0/24"`,
		`"msg":"decision","kind":"admin","outcome":"allow","method":"GET","path":"/api/admin/connections","client_ip":"192.0.2.0/24"`,
		`"msg":"decision","kind":"admin","outcome":"deny","code":"ADMIN_FORBIDDEN","reason":"wrong token"`,
		`"msg":"decision","kind":"admin","outcome":"deny","code":"ADMIN_UNAUTHORIZED","reason":"no token"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("decision records lack %s:\n%s", want, got)
		}
	}
	for _, leak := range []string{testToken, "192.0.2.7", "wrong-token"} {
		if strings.Contains(got, leak) {
			t.Errorf("decision records contain %q", leak)
		}
	}
}
