package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/approval/approvaltest"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
)

// TestApprovalSurvivesRestart: a single gateway keeps its holds in its
// SQLite file, so an approval for two payments granted before a restart
// lets the second through after it, without a new request, and no third.
func TestApprovalSurvivesRestart(t *testing.T) {
	agent, _ := identity.New("alice")
	claims := claimcachetest.NewServer()
	t.Cleanup(claims.Close)
	claims.Approve(claimcache.Claim{Namespace: "alice", Service: "bank", PublicKey: agent.PublicKeyString()})
	desk := &approvaltest.Desk{}
	mux := http.NewServeMux()
	mux.Handle("/v1/gateways/actions", desk)
	mux.Handle("/v1/gateways/actions/", desk)
	mux.Handle("/", claims)
	cp := httptest.NewServer(mux)
	t.Cleanup(cp.Close)
	var paid atomic.Int64
	bank := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		paid.Add(1)
	}))
	t.Cleanup(bank.Close)

	cfg := minimalConfig(t)
	cfg.ControlPlaneURL, cfg.ServiceAPIKey = cp.URL, claims.APIKey("bank")
	cfg.Proxy.PublicAuthority = publicAuthority
	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	pinned, _ := json.Marshal(approvaltest.Keys("acme", owner))
	if err := os.WriteFile(filepath.Join(cfg.DataDir, pairing.OwnerKeysFile), pinned, 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(first bool) (*gateway.Gateway, string) {
		gw, err := gateway.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Close() })
		if first {
			if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "bank", Service: "bank", BaseURL: bank.URL,
				AuthMode: credvault.AuthBearer, AuthSecretKey: "token", ApprovalRoutes: []string{"POST /pay"}},
				map[string]string{"token": "bank-token"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := gw.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := gw.Up(ctx); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return gw, srv.URL
	}
	gw, url := start(true)
	pay := func(url string) (int, string) {
		t.Helper()
		body := []byte(`{"to":"bob","amount":"12.50"}`)
		req, _ := http.NewRequest("POST", "http://"+publicAuthority+"/proxy/bank/pay", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if err := agent.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		req.URL, _ = req.URL.Parse(url + "/proxy/bank/pay")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var env struct{ Code string }
		json.NewDecoder(res.Body).Decode(&env)
		return res.StatusCode, env.Code
	}
	if status, code := pay(url); code != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("the first payment answered %d %s", status, code)
	}
	desk.Approve(desk.Filed()[0], 2, time.Time{}, owner)
	if status, code := pay(url); status != http.StatusOK {
		t.Fatalf("the approved payment answered %d %s", status, code)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}

	_, url = start(false)
	if status, code := pay(url); status != http.StatusOK {
		t.Fatalf("after the restart, the approval's second use answered %d %s", status, code)
	}
	if status, code := pay(url); code != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("a third payment answered %d %s", status, code)
	}
	if n := len(desk.Filed()); n != 2 || paid.Load() != 2 {
		t.Fatalf("%d requests filed and %d payments made, want 2 and 2", n, paid.Load())
	}
}
