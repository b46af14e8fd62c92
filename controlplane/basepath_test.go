package controlplane

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idnhq/idn/identity"
)

// TestMountedUnderBasePath serves the control plane under /idn/ beside an
// embedder's own route, as examples/embedcp does: the API, signed requests
// (which cover the full path), the dashboard's links, redirects, assets
// and sign-in links all carry the base path, and nothing answers outside it.
func TestMountedUnderBasePath(t *testing.T) {
	t.Parallel()
	st := openStore(t, storeConfig(t, ProviderSQLite))
	cp, err := New(Config{Store: st, JWTSecret: testSecret, BasePath: "/idn", SigninLinks: true, InsecureLocalhostCookie: true})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/idn/", cp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the embedder's own page") })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path string, cookie string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}

	ctx := context.Background()
	if _, err := cp.Provision(ctx, "acme", ServiceSpec{Slug: "github"}); err != nil {
		t.Fatal(err)
	}
	tok, _, err := cp.IssueSession(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	if res, body := get("/", ""); res.StatusCode != 200 || body != "the embedder's own page" {
		t.Fatalf("the embedder's route: %d %q", res.StatusCode, body)
	}
	if res, _ := get("/idn", ""); res.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("/idn: %d, want the mux's redirect to /idn/", res.StatusCode)
	}
	res, body := get("/idn/login", "")
	if res.StatusCode != 200 || !strings.Contains(body, `href="/idn/signup"`) || !strings.Contains(body, `src="/idn/assets/`) ||
		!strings.Contains(body, `data-base="/idn"`) || !strings.Contains(body, `data-next="/idn/claims"`) {
		t.Fatalf("login page: %d %s", res.StatusCode, body)
	}
	asset := body[strings.Index(body, `src="/idn/assets/`)+len(`src="`):]
	asset = asset[:strings.Index(asset, `"`)]
	if res, _ := get(asset, ""); res.StatusCode != 200 {
		t.Fatalf("asset %s: %d", asset, res.StatusCode)
	}
	wantLogin := "/idn/login?" + url.Values{"next": {"/idn/claims?status=approved"}}.Encode()
	if res, _ := get("/idn/claims?status=approved", ""); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != wantLogin {
		t.Fatalf("owner page without a session: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := get("/idn/", tok); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/idn/claims" {
		t.Fatalf("home: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body = get("/idn/claims", tok)
	if res.StatusCode != 200 || !strings.Contains(body, `href="/idn/services"`) || !strings.Contains(body, `action="/idn/claims"`) ||
		strings.Contains(body, `href="/services"`) {
		t.Fatalf("claims page: %d %s", res.StatusCode, body)
	}
	if res, body := get("/idn/v1/services", tok); res.StatusCode != 200 || !strings.Contains(body, `"slug":"github"`) {
		t.Fatalf("owner API: %d %s", res.StatusCode, body)
	}
	if res, _ := get("/v1/services", tok); res.StatusCode != 200 {
		t.Fatalf("outside the base the embedder answers: %d", res.StatusCode)
	}

	// A signed lookup: the signature covers /idn/v1/namespaces/acme.
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/idn/v1/namespaces/acme", nil)
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	signed, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	signed.Body.Close()
	if signed.StatusCode != 200 {
		t.Fatalf("signed lookup under the base: %d", signed.StatusCode)
	}

	link, _, err := cp.SigninLink(ctx, "acme", "/signin")
	if err != nil || !strings.HasPrefix(link, "/idn/signin#idn_sl_") {
		t.Fatalf("sign-in link %q, %v", link, err)
	}
	if res, body := get("/idn/1.0/identifiers/did:idn:acme", ""); res.StatusCode != 200 || !strings.Contains(body, "did:idn:acme") {
		t.Fatalf("DID resolution under the base: %d %s", res.StatusCode, body)
	}
	if _, err := New(Config{Store: st, JWTSecret: testSecret, BasePath: "/idn/"}); err == nil {
		t.Fatal("a base path ending in / was accepted")
	}
}
