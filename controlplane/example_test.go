package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
)

// Example runs a control plane on SQLite, seeds an owner, a service and an
// approved agent, and reads the approved-claims feed as a gateway does:
// with the service's API key and its own signed headers.
func Example() {
	dir, _ := os.MkdirTemp("", "controlplane-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	api, err := controlplane.New(controlplane.Config{
		Store:         store,
		JWTSecret:     []byte("example-secret-of-at-least-32-bytes!"),
		TestSeedToken: "example-token",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(api)
	defer ts.Close()

	agent, _ := identity.New("acme")
	seed := fmt.Sprintf(`{"namespaces":["acme"],"services":[{"slug":"github","name":"GitHub","owner":"acme"}],
		"claims":[{"namespace":"acme","service":"github","public_key":%q,"status":"approved"}]}`, identity.FormatPublicKey(agent.PublicKey))
	req, _ := http.NewRequest("POST", ts.URL+"/v1/test/seed", strings.NewReader(seed))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "example-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var seeded struct {
		APIKeys map[string]string `json:"api_keys"`
	}
	json.NewDecoder(res.Body).Decode(&seeded)
	res.Body.Close()

	gateway, _ := identity.New("gateway")
	req, _ = http.NewRequest("GET", ts.URL+"/v1/namespaces/claims?service=github&limit=2000", nil)
	req.Header.Set("Authorization", "Bearer "+seeded.APIKeys["github"])
	gateway.Sign(req, identity.SignOptions{})
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var feed struct {
		Claims []struct {
			Namespace string `json:"namespace"`
			PublicKey string `json:"public_key"`
		} `json:"claims"`
		Pagination struct {
			Total   int  `json:"total"`
			HasMore bool `json:"has_more"`
		} `json:"pagination"`
	}
	json.NewDecoder(res.Body).Decode(&feed)
	fmt.Println(res.StatusCode, feed.Pagination.Total, feed.Pagination.HasMore)
	fmt.Println(feed.Claims[0].Namespace, feed.Claims[0].PublicKey == identity.FormatPublicKey(agent.PublicKey))
	// Output:
	// 200 1 false
	// acme true
}

// ExampleServer_IssueSession mints an owner session without a passkey
// ceremony (as tests and tools do) and uses it as the idn_session cookie.
func ExampleServer_IssueSession() {
	dir, _ := os.MkdirTemp("", "controlplane-session")
	defer os.RemoveAll(dir)
	store, _ := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp.db")})
	defer store.Close()
	api, _ := controlplane.New(controlplane.Config{Store: store, JWTSecret: []byte("example-secret-of-at-least-32-bytes!"), TestSeedToken: "t"})
	ts := httptest.NewServer(api)
	defer ts.Close()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/test/seed", strings.NewReader(`{"namespaces":["acme"]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "t")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
	}

	token, _, err := api.IssueSession(context.Background(), "acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	req, _ = http.NewRequest("POST", ts.URL+"/v1/services", strings.NewReader(`{"name":"GitHub proxy","service_endpoint":"https://gh.example"}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: token})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var created struct {
		Service struct {
			Slug string `json:"slug"`
		} `json:"service"`
		APIKey struct {
			Key string `json:"key"`
		} `json:"api_key"`
	}
	json.NewDecoder(res.Body).Decode(&created)
	fmt.Println(res.StatusCode, created.Service.Slug, strings.HasPrefix(created.APIKey.Key, "idn_sk_"))
	// Output: 201 github-proxy true
}
