package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"github.com/idnhq/idn/claimcache"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
)

func call(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// A gateway pointed at a real control plane accepts an approved agent,
// refuses it within one poll after the owner revokes the claim, and
// requires signed, approved callers for admin tests.
func TestGatewayWithControlPlane(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()

	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp", "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	jwt := make([]byte, 32)
	_, _ = rand.Read(jwt)
	cp, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: jwt, TestSeedToken: "seed-token-for-tests"})
	if err != nil {
		t.Fatal(err)
	}
	cpSrv := httptest.NewServer(openapicheck.Watch(t, cp))
	defer cpSrv.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-secret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()

	agent, _ := identity.New("agent-ns")
	seedBody, _ := json.Marshal(map[string]any{
		"namespaces": []string{"agent-ns"},
		"services":   []map[string]string{{"slug": "svc", "name": "Service", "owner": "agent-ns"}},
		"claims":     []map[string]string{{"namespace": "agent-ns", "service": "svc", "public_key": agent.PublicKeyString(), "status": "approved"}},
	})
	req, _ := http.NewRequest("POST", cpSrv.URL+"/v1/test/seed", bytes.NewReader(seedBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "seed-token-for-tests")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("seed: %v %v", resp, err)
	}
	var seeded struct {
		APIKeys  map[string]string `json:"api_keys"`
		Sessions map[string]string `json:"sessions"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&seeded)
	resp.Body.Close()

	key, _ := credvault.GenerateMasterKey()
	cfg := gateway.Config{
		DataDir: filepath.Join(dir, "gw"), MasterKey: key, Admin: admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: cpSrv.URL, ServiceAPIKey: seeded.APIKeys["svc"],
		Claims: claimcache.Options{RefreshInterval: time.Second, TTL: 5 * time.Second},
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "conn", Service: "svc", BaseURL: upstream.URL,
		AuthMode: "bearer", AuthSecretKey: "t"}, map[string]string{"t": "upstream-secret"}); err != nil {
		t.Fatal(err)
	}
	gwSrv := httptest.NewServer(openapicheck.Watch(t, gw))
	defer gwSrv.Close()
	signed := func(method, url, body string) *http.Request {
		var rb io.Reader
		if body != "" {
			rb = bytes.NewReader([]byte(body))
		}
		r, _ := http.NewRequest(method, url, rb)
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		if err := agent.Sign(r, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// From the moment Start returns, a request meets claims that are
	// loading (503 AUTH_CLAIMS_UNAVAILABLE), never an unknown service.
	first := signed("GET", gwSrv.URL+"/proxy/conn/x", "")
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, first)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "AUTH_CLAIMS_UNAVAILABLE") {
		t.Fatalf("right after Start: %d %s", rec.Code, rec.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body := call(t, signed("GET", gwSrv.URL+"/proxy/conn/x", ""))
		if status == 200 {
			break
		}
		if status != http.StatusServiceUnavailable || body["code"] != "AUTH_CLAIMS_UNAVAILABLE" {
			t.Fatalf("while claims load: %d %v", status, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("approved agent still refused (%d)", status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Unclean paths reach the pipeline (no mux redirect) and are refused there.
	if status, body := call(t, signed("GET", gwSrv.URL+"/proxy/conn/a/../../admin", "")); status != 400 || body["code"] != "VALIDATION_ERROR" {
		t.Errorf("dot-segment path: %d %v", status, body)
	}

	// Admin test needs signed headers and an approved claim.
	unsigned, _ := http.NewRequest("POST", gwSrv.URL+"/api/admin/connections/conn/test", nil)
	if status, body := call(t, unsigned); status != 403 || body["code"] != "AUTH_IDENTITY_INVALID" {
		t.Errorf("unsigned admin test: %d %v", status, body)
	}
	if status, body := call(t, signed("POST", gwSrv.URL+"/api/admin/connections/conn/test", "")); status != 200 || body["ok"] != true {
		t.Errorf("signed admin test: %d %v", status, body)
	}

	// The owner revokes the claim; the gateway refuses the agent as revoked
	// within one poll.
	list, _ := http.NewRequest("GET", cpSrv.URL+"/v1/namespaces/agent-ns/claims?status=approved", nil)
	list.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: seeded.Sessions["agent-ns"]})
	_, claims := call(t, list)
	items, _ := claims["claims"].([]any)
	if len(items) != 1 {
		t.Fatalf("owner listing: %v", claims)
	}
	id := items[0].(map[string]any)["claim_id"].(string)
	revoke, _ := http.NewRequest("POST", cpSrv.URL+"/v1/claims/"+id+"/revoke", nil)
	revoke.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: seeded.Sessions["agent-ns"]})
	if status, body := call(t, revoke); status != 200 {
		t.Fatalf("revoke: %d %v", status, body)
	}
	revokedAt := time.Now()
	for {
		status, body := call(t, signed("GET", gwSrv.URL+"/proxy/conn/x", ""))
		if status == 403 && body["code"] == "AUTH_CLAIM_REVOKED" && body["claim_id"] == id {
			break
		}
		if time.Since(revokedAt) > cfg.Claims.RefreshInterval+2*time.Second {
			t.Fatalf("answered %d %v %s after revocation (refresh every %s)", status, body, time.Since(revokedAt), cfg.Claims.RefreshInterval)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("revocation took effect after %s (poll interval %s)", time.Since(revokedAt).Round(time.Millisecond), cfg.Claims.RefreshInterval)
}
