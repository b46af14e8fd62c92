package controlplane_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
)

// ExampleServer_Start registers a webhook for a service, approves a
// claim, and lets the background work Start runs deliver the event; the
// receiver checks the Standard Webhooks signature with the secret it was
// given once.
func ExampleServer_Start() {
	dir, _ := os.MkdirTemp("", "controlplane-webhooks")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "cp.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	api, err := controlplane.New(controlplane.Config{
		Store:         store,
		JWTSecret:     []byte("example-secret-of-at-least-32-bytes!"),
		TestSeedToken: "t",
		Webhooks: controlplane.WebhookConfig{
			SecretKey:                   []byte("example-webhook-key-of-32-bytes!"),
			InsecureAllowPrivateTargets: true, // the receiver below listens on loopback
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(api)
	defer ts.Close()

	secret := make(chan string, 1)
	events := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s := <-secret
		secret <- s
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%s.%s", r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), body)
		if r.Header.Get("webhook-signature") != "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p struct {
			Type string `json:"type"`
			Data struct {
				Namespace, Service, Status string
			} `json:"data"`
		}
		json.Unmarshal(body, &p)
		events <- fmt.Sprintf("%s %s %s %s", p.Type, p.Data.Namespace, p.Data.Service, p.Data.Status)
	}))
	defer receiver.Close()

	call := func(method, path, body string, session string, out any) int {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-IDN-Test-Seed-Token", "t")
		req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: session})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		defer res.Body.Close()
		json.NewDecoder(res.Body).Decode(out)
		return res.StatusCode
	}
	agent, _ := identity.New("acme")
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
		Claims   []struct {
			ID string `json:"claim_id"`
		} `json:"claims"`
	}
	call("POST", "/v1/test/seed", fmt.Sprintf(`{"namespaces":["acme"],"services":[{"slug":"github","owner":"acme"}],
		"claims":[{"namespace":"acme","service":"github","public_key":%q,"status":"pending"}]}`,
		identity.FormatPublicKey(agent.PublicKey)), "", &seeded)
	owner := seeded.Sessions["acme"]
	var services struct {
		Services []struct{ ID string } `json:"services"`
	}
	call("GET", "/v1/services", "", owner, &services)

	var hook struct{ ID, Secret string }
	status := call("POST", "/v1/services/"+services.Services[0].ID+"/webhooks",
		fmt.Sprintf(`{"url":%q,"events":["request.approved"]}`, receiver.URL), owner, &hook)
	secret <- hook.Secret
	fmt.Println(status, strings.HasPrefix(hook.Secret, "whsec_"))

	if err := api.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer api.Close() // before the store closes
	call("POST", "/v1/claims/"+seeded.Claims[0].ID+"/approve", "", owner, &struct{}{})
	fmt.Println(<-events)
	// Output:
	// 201 true
	// request.approved acme github approved
}
