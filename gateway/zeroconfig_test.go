package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestZeroConfigProtects: a gateway configured with nothing but what is
// required has every protection on. Each row is an attack the zero value
// must refuse.
func TestZeroConfigProtects(t *testing.T) {
	t.Parallel()
	agent, _ := identity.New("alice")
	controlPlane := claimcachetest.NewServer()
	t.Cleanup(controlPlane.Close)
	controlPlane.Approve(claimcache.Claim{Namespace: "alice", Service: "weather", PublicKey: agent.PublicKeyString()})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("sunny")) }))
	t.Cleanup(upstream.Close)

	cfg := minimalConfig(t)
	cfg.ControlPlaneURL, cfg.ServiceAPIKey = controlPlane.URL, controlPlane.APIKey("weather")
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "weather", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ready, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := gw.Up(ready); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	adminToken, err := gateway.AdminToken(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}

	// send signs (with id, unless nil) and sends one request, and returns
	// its status and error code.
	send := func(t *testing.T, id *identity.Identity, o identity.SignOptions, method, path string, body []byte, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if id != nil {
			if err := id.Sign(req, o); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&env)
		return resp.StatusCode, env.Code
	}
	if status, _ := send(t, agent, identity.SignOptions{}, "GET", "/proxy/weather/today", nil); status != http.StatusOK {
		t.Fatalf("the approved agent's request: %d", status)
	}

	tests := []struct {
		name       string
		attack     func(t *testing.T) (int, string)
		wantStatus int
		wantCode   string
	}{
		{"replayed request (replay store on)", func(t *testing.T) (int, string) {
			send(t, agent, identity.SignOptions{Nonce: "replayed-nonce-0001"}, "GET", "/proxy/weather/today", nil)
			return send(t, agent, identity.SignOptions{Nonce: "replayed-nonce-0001"}, "GET", "/proxy/weather/today", nil)
		}, http.StatusForbidden, "AUTH_REPLAY_DETECTED"},
		{"signature older than 300 s (signature window)", func(t *testing.T) (int, string) {
			return send(t, agent, identity.SignOptions{Created: time.Now().Add(-301 * time.Second)}, "GET", "/proxy/weather/today", nil)
		}, http.StatusForbidden, "AUTH_SIGNATURE_INVALID"},
		{"body past 8 MiB (body cap)", func(t *testing.T) (int, string) {
			return send(t, agent, identity.SignOptions{}, "POST", "/proxy/weather/upload", bytes.Repeat([]byte("x"), 8<<20+1))
		}, http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE"},
		{"admin token alone tests a stored credential (signed admin checks)", func(t *testing.T) (int, string) {
			return send(t, nil, identity.SignOptions{}, "POST", "/api/admin/connections/weather/test", []byte(`{}`),
				"Authorization", "Bearer "+adminToken, "Content-Type", "application/json")
		}, http.StatusForbidden, "AUTH_IDENTITY_INVALID"},
		{"unknown keys of one namespace file a 31st claim in a minute (claim rate limit)", func(t *testing.T) (int, string) {
			var status int
			var code string
			for range 31 {
				mallory, _ := identity.New("mallory")
				status, code = send(t, mallory, identity.SignOptions{}, "GET", "/proxy/weather/today", nil)
			}
			return status, code
		}, http.StatusTooManyRequests, "AUTH_CLAIM_SUBMIT_RATE_LIMITED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code := tt.attack(t)
			if status != tt.wantStatus || code != tt.wantCode {
				t.Errorf("got %d %s, want %d %s", status, code, tt.wantStatus, tt.wantCode)
			}
		})
	}
	if n := len(controlPlane.Submissions()); n != 30 {
		t.Errorf("claims filed = %d, want 30", n)
	}
}
