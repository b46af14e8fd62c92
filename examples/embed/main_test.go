package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
)

// The gateway under /idn/ serves an approved agent that signed the URL it
// called, refuses a signature made for the same path without the prefix,
// and leaves the application's own routes alone.
func TestEmbedUnderPrefix(t *testing.T) {
	agent, _ := identity.New("alice")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "sunny in "+r.URL.Path)
	}))
	defer upstream.Close()
	// The control plane's claims API, approving alice for "weather".
	cp := claimcachetest.NewServer()
	defer cp.Close()
	cp.Approve(claimcache.Claim{Namespace: "alice", Service: "weather", PublicKey: agent.PublicKeyString()})

	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: cp.URL, ServiceAPIKey: cp.APIKey("weather")})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx := context.Background()
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "weather", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(newMux(gw))
	defer app.Close()
	up, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := gw.Up(up); err != nil {
		t.Fatal(err)
	}

	rows := []struct {
		name      string
		signedFor string // the path the agent signed; "" sends unsigned
		sentTo    string
		status    int
		body      string
	}{
		{"agent_signs_the_url_it_calls", "/idn/proxy/weather/paris", "/idn/proxy/weather/paris", 200, "sunny in /paris"},
		{"signature_without_the_prefix_replayed_under_it", "/proxy/weather/paris", "/idn/proxy/weather/paris", 403, "AUTH_SIGNATURE_INVALID"},
		{"unsigned_call", "", "/idn/proxy/weather/paris", 403, "AUTH_IDENTITY_INVALID"},
		{"application_route_untouched", "", "/", 200, "the existing application\n"},
		{"gateway_not_at_the_root", "", "/proxy/weather/paris", 404, "404 page not found\n"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var signer *identity.Identity
			if row.signedFor != "" {
				signer = agent
			}
			status, body := call(t, signer, app.URL+row.signedFor, app.URL+row.sentTo)
			var refusal struct{ Code string }
			if json.Unmarshal([]byte(body), &refusal) == nil && refusal.Code != "" {
				body = refusal.Code
			}
			if status != row.status || body != row.body {
				t.Errorf("answer %d %q, want %d %q", status, body, row.status, row.body)
			}
		})
	}
}

// call sends GET url with the headers signer (when set) made for a GET of
// signedFor, and returns the status and body.
func call(t *testing.T, signer *identity.Identity, signedFor, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if signer != nil {
		signed, _ := http.NewRequest(http.MethodGet, signedFor, nil)
		if err := signer.Sign(signed, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		req.Header = signed.Header
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
