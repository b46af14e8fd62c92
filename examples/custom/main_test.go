package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
)

// controlPlane runs a real control plane in which agent is approved for
// service "weather" and the namespace mallory exists, and returns its URL
// and the service's API key.
func controlPlane(t *testing.T, agent *identity.Identity) (string, string) {
	t.Helper()
	ctx := context.Background()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(t.TempDir(), "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	cp, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: secret, TestSeedToken: "seed-token-for-tests"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(cp)
	t.Cleanup(srv.Close)
	seed, _ := json.Marshal(map[string]any{
		"namespaces": []string{"owner", "mallory"},
		"services":   []map[string]string{{"slug": "weather", "name": "Weather", "owner": "owner"}},
		"claims": []map[string]string{{"namespace": agent.Namespace, "service": "weather",
			"public_key": agent.PublicKeyString(), "status": "approved"}},
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/test/seed", bytes.NewReader(seed))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "seed-token-for-tests")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seeded struct {
		APIKeys map[string]string `json:"api_keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&seeded); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("seed: %d %v", resp.StatusCode, err)
	}
	return srv.URL, seeded.APIKeys["weather"]
}

// The parts-built gateway forwards an approved agent with the credential
// from the environment, files a claim for an unknown one, and refuses to
// start without the credential.
func TestCustomGateway(t *testing.T) {
	approved, _ := identity.New("alice")
	stranger, _ := identity.New("mallory")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer env-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "sunny in "+r.URL.Path)
	}))
	defer upstream.Close()
	cpURL, apiKey := controlPlane(t, approved)
	env := map[string]string{"IDN_REGISTRY_URL": cpURL, "IDN_SERVICE_API_KEY": apiKey,
		"WEATHER_URL": upstream.URL, "WEATHER_TOKEN": "env-token"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := newHandler(ctx, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	defer gw.Close()

	get := func(agent *identity.Identity) (int, string) {
		client := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
		resp, err := client.Get(gw.URL + "/proxy/weather/paris")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get(approved); status != 200 || body != "sunny in /paris" {
		t.Errorf("approved agent: %d %s", status, body)
	}
	if status, body := get(stranger); status != 403 || !strings.Contains(body, "AUTH_CLAIM_REQUIRED") || !strings.Contains(body, `"claim_id":"clm_`) {
		t.Errorf("unknown agent: %d %s, want 403 AUTH_CLAIM_REQUIRED with the filed claim", status, body)
	}

	delete(env, "WEATHER_TOKEN")
	if _, err := newHandler(ctx, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "WEATHER_TOKEN") {
		t.Errorf("without its credential: %v, want an error naming WEATHER_TOKEN", err)
	}
}
