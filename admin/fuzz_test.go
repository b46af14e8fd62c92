package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
)

// FuzzConnectionBody feeds arbitrary bodies to the create and PATCH
// decoders. They never panic, fail only with a 400 envelope error, and
// what they accept and the vault would accept survives a JSON round trip.
func FuzzConnectionBody(f *testing.F) {
	seeds := []string{
		`{"id":"gh","base_url":"https://api.github.com","auth_mode":"bearer","auth_secret_key":"t","secrets":{"t":"x"}}`,
		`{"id":"m","protocol":"mcp","base_url":"http://127.0.0.1:1","mcp_subject_tool_policies":{"s":{"allow":["a.*"]}}}`,
		`{"name":null,"path_prefix":"/v1","mcp_tool_allowlist":["x"]}`,
		`{"secrets":{"t":"{{A}}{{"}}`, `[]`, `null`, `{"id":1}`, `{"base_url":"http://[::1"}`, `{"a":1}{"b":2}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	v := testVault(f)
	f.Fuzz(func(t *testing.T, body string) {
		checkClientError := func(err error) {
			var ae *apierror.Error
			var ve *credvault.ValidationError
			if errors.As(err, &ae) && ae.Code().Status() == 400 || errors.As(err, &ve) {
				return
			}
			t.Fatalf("decode failed with a non-400 error: %v", err)
		}
		c, secrets, err := parseCreate([]byte(body))
		if err != nil {
			checkClientError(err)
		} else if v.ValidateConnection(c, secrets) == nil {
			raw, _ := json.Marshal(c)
			var back credvault.Connection
			if err := json.Unmarshal(raw, &back); err != nil || back.ID != c.ID {
				t.Fatalf("accepted connection does not round-trip: %v", err)
			}
		}
		obj, err := decodeObject([]byte(body))
		if err != nil {
			checkClientError(err)
			return
		}
		base := &credvault.Connection{ID: "base", BaseURL: "https://a.example", AuthMode: "bearer", AuthSecretKey: "t"}
		if err := applyFields(base, obj, nil); err != nil {
			checkClientError(err)
		}
		_ = v.ValidateConnection(base, map[string]string{"t": "x"})
	})
}

// FuzzCatalog checks that the catalog parser never panics and that what it
// accepts survives a round trip.
func FuzzCatalog(f *testing.F) {
	f.Add(string(defaultCatalogJSON))
	f.Add(`{"schema_version":1,"services":[]}`)
	f.Add(`{"schema_version":1,"services":[{"id":"a","name":"A","base_url":"https://a.b","auth_mode":"query_param"}]}`)
	f.Add(`{"schema_version":1,"services":null}`)
	v := testVault(f)
	f.Fuzz(func(t *testing.T, body string) {
		cat, err := decodeCatalog([]byte(body), v.ValidateConnection)
		if err != nil {
			return
		}
		out, _ := json.Marshal(cat)
		if _, err := decodeCatalog(out, v.ValidateConnection); err != nil {
			t.Fatalf("accepted catalog does not round-trip: %v", err)
		}
	})
}

// FuzzAccessHeaders sends a remote request with attacker-chosen Origin,
// Sec-Fetch-Site, X-Forwarded-For, Forwarded and Authorization headers to
// every mode: it is admitted only with the right token, and never in
// loopback mode.
func FuzzAccessHeaders(f *testing.F) {
	f.Add("https://dash.example.com", "cross-site", "127.0.0.1", "for=127.0.0.1", "Bearer "+testToken)
	f.Add("", "", "127.0.0.1, ::1", "", "bearer  "+testToken+" ")
	f.Add("null", "none", "garbage", "for=\"[::1]\"", "Basic x")
	f.Fuzz(func(t *testing.T, origin, fetchSite, xff, fwd, authz string) {
		for _, mode := range []AccessMode{AccessHybrid, AccessLoopback, AccessToken} {
			a, err := NewAccess(AccessConfig{AccessOptions: AccessOptions{Mode: mode, Token: testToken, AllowedOrigins: []string{"https://dash.example.com"}}})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "http://127.0.0.1:38100/api/admin/connections", nil)
			req.RemoteAddr = "203.0.113.9:5000"
			for k, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": fetchSite, "X-Forwarded-For": xff, "Forwarded": fwd, "Authorization": authz} {
				if v != "" {
					req.Header[k] = []string{v}
				}
			}
			admitted := false
			a.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { admitted = true })).ServeHTTP(httptest.NewRecorder(), req)
			if !admitted {
				continue
			}
			tok, err := bearerToken(req)
			if mode == AccessLoopback || err != nil || tok != testToken {
				t.Fatalf("%s mode admitted a remote request with Authorization %q", mode, authz)
			}
		}
	})
}
