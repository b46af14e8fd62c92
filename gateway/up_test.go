package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
)

func TestUp(t *testing.T) {
	t.Parallel()
	controlPlane := claimcachetest.NewServer()
	t.Cleanup(controlPlane.Close)
	controlPlane.Approve(claimcache.Claim{Namespace: "alice", Service: "weather", PublicKey: "ed25519:AAAA"})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	tests := []struct {
		name string
		// controlPlaneURL is where the claims feed is read.
		controlPlaneURL string
		start, close    bool
		timeout         time.Duration // of Up's context
		wantErr         error         // matched with errors.Is; nil: Up succeeds
		wantText        string        // in the error
	}{
		{"claims loaded", controlPlane.URL, true, false, 10 * time.Second, nil, ""},
		{"before Start", controlPlane.URL, false, false, 10 * time.Second, nil, "before Start"},
		{"control plane down until the context ends", down.URL, true, false, 100 * time.Millisecond, context.DeadlineExceeded, `claims: claims for service "weather" never loaded`},
		{"closed before ready", down.URL, true, true, 10 * time.Second, nil, "stopped before it was ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := minimalConfig(t)
			cfg.ControlPlaneURL, cfg.ServiceAPIKey = tt.controlPlaneURL, controlPlane.APIKey("weather")
			gw, err := gateway.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gw.Close() })
			if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "weather", BaseURL: "https://weather.example",
				AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"}); err != nil {
				t.Fatal(err)
			}
			if tt.start {
				if err := gw.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if tt.close {
				gw.Close()
			}
			ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
			defer cancel()
			err = gw.Up(ctx)
			if tt.wantErr == nil && tt.wantText == "" {
				if err != nil {
					t.Fatalf("Up: %v", err)
				}
				rec := httptest.NewRecorder()
				gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health/ready", nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("/health/ready after Up: %d %s", rec.Code, rec.Body)
				}
				return
			}
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("Up = %v, want an error matching %v and saying %q", err, tt.wantErr, tt.wantText)
			}
		})
	}
}
