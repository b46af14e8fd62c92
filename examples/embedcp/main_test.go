package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
)

// The control plane under /idn/ answers its API, signed lookups (signed
// with the prefix), its dashboard after a one-time sign-in link, and
// leaves the application's own routes alone.
func TestControlPlaneUnderPrefix(t *testing.T) {
	ctx := context.Background()
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(t.TempDir(), "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var app *httptest.Server
	var handler http.Handler
	app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer app.Close()
	origin := strings.Replace(app.URL, "127.0.0.1", "localhost", 1) // WebAuthn wants a host name
	cp, err := newControlPlane(store, origin)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.Up(ctx); err != nil {
		t.Fatal(err)
	}
	handler = newMux(cp)
	if _, err := cp.Provision(ctx, "acme", controlplane.ServiceSpec{Slug: "weather"}); err != nil {
		t.Fatal(err)
	}

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	get := func(path string) (int, string) {
		t.Helper()
		res, err := client.Get(origin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := get("/"); status != 200 || body != "the existing application\n" {
		t.Fatalf("the application: %d %q", status, body)
	}
	if status, body := get("/idn/1.0/identifiers/did:idn:acme"); status != 200 || !strings.Contains(body, `"id":"did:idn:acme"`) {
		t.Fatalf("DID resolution: %d %s", status, body)
	}

	agent, _ := identity.New("acme")
	req, _ := http.NewRequest("GET", app.URL+"/idn/v1/namespaces/acme", nil)
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("signed lookup: %d", res.StatusCode)
	}

	// The sign-in link: the page's script posts its token, as a browser
	// does, and the session cookie opens the dashboard.
	link, _, err := cp.SigninLink(ctx, "acme", "/signin")
	if err != nil {
		t.Fatal(err)
	}
	path, token, _ := strings.Cut(link, "#")
	if status, body := get(path); status != 200 || !strings.Contains(body, `data-base="/idn"`) {
		t.Fatalf("sign-in page: %d %s", status, body)
	}
	post, _ := http.NewRequest("POST", origin+"/idn/v1/auth/signin-link", strings.NewReader(`{"token":"`+token+`"}`))
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Origin", origin)
	if res, err := client.Do(post); err != nil || res.StatusCode != 200 {
		t.Fatalf("redeem: %v %v", res, err)
	}
	if status, body := get("/idn/claims"); status != 200 || !strings.Contains(body, `data-namespace="acme"`) || !strings.Contains(body, `href="/idn/services"`) {
		t.Fatalf("claims page: %d %s", status, body)
	}
	if status, body := get("/idn/v1/services"); status != 200 || !strings.Contains(body, `"slug":"weather"`) {
		t.Fatalf("services: %d %s", status, body)
	}
}
