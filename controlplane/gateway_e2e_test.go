package controlplane_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/gatewayd"
)

// TestGatewayAgainstControlPlane runs a whole gateway (internal/gatewayd)
// pointed at this control plane with a seeded service key: an approved
// agent gets through to the upstream, and after the owner revokes the
// claim it is refused within one feed poll (1 s here).
func TestGatewayAgainstControlPlane(t *testing.T) {
	cp, seeded := startSeededControlPlane(t)
	agent, _ := identity.New("acme")
	claimID := seeded.claim(t, "acme", "github", agent)

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from upstream, "+r.Header.Get("Authorization"))
	}))
	defer upstream.Close()

	key, _ := credvault.GenerateMasterKey()
	vars := map[string]string{
		"GATEWAY_DATA_DIR": t.TempDir(), "GATEWAY_MASTER_KEY": key.Encode(), "GATEWAY_ADMIN_ACCESS_MODE": "loopback",
		"IDN_REGISTRY_URL": cp.URL, "IDN_SERVICE_API_KEY": seeded.APIKeys["github"],
		"GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS": "1", "GATEWAY_CLAIMS_CACHE_TTL_SECONDS": "5",
	}
	settings, err := gatewayd.LoadSettings(func(k string) string { return vars[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gw, err := gatewayd.New(ctx, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "github", BaseURL: upstream.URL, AuthMode: "bearer", AuthSecretKey: "token"},
		map[string]string{"token": "upstream-secret"}); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { defer close(ran); gw.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	gws := httptest.NewServer(gw.Handler())
	defer gws.Close()

	call := func() (int, string) {
		req, _ := http.NewRequest("GET", gws.URL+"/proxy/github/user", nil)
		if err := agent.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// The gateway loads the feed on its first poll.
	until(t, 5*time.Second, "the approved agent to get through", func() bool {
		code, body := call()
		return code == 200 && body == "hello from upstream, Bearer upstream-secret"
	})

	seeded.owner(t, "acme", claimID, "revoke")
	revoked := time.Now()
	until(t, 3*time.Second, "the revoked agent to be refused", func() bool {
		code, body := call()
		return code == 403 && strings.Contains(body, "AUTH_CLAIM_REQUIRED")
	})
	if d := time.Since(revoked); d > 2*time.Second {
		t.Fatalf("refused %v after revocation; the poll is 1 s", d)
	}
}

// until retries cond (a real request each time) until it holds.
func until(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond) // the gateway polls on its own clock; nothing to await
	}
}
