package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/e2e/internal/oauthoptest"
	"github.com/idnhq/idn/identity"
)

// TestGatewayOAuthConnectFromDashboard: the owner connects alice's
// account from the gateway page. Chromium signs in at a real OpenID
// provider, which redirects to the control plane; the control plane
// relays the redirect to the gateway, which redeems the code with its
// PKCE verifier. An agent acting for alice is then served with her
// account. The attack rows: a replayed redirect, one with another
// issuer's iss, a state no flow of this owner has, and another owner
// relaying or starting a flow.
func TestGatewayOAuthConnectFromDashboard(t *testing.T) {
	chromium(t)
	agent, err := identity.New("agent-drive")
	if err != nil {
		t.Fatal(err)
	}
	p := pairFromDashboard(t, agent, "drive", "Drive", "connect-laptop")
	b, audit, gwAddr := p.b, p.audit, p.addr
	callback := p.w.base + "/oauth/callback"
	as := oauthoptest.New(t, callback)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := as.UserOf(r.Header.Get("Authorization"))
		if !ok {
			http.Error(w, "unknown token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "files of %s", user)
	}))
	t.Cleanup(api.Close)

	step(t, "add a connection with one account per subject")
	eval[bool](b, `(() => { const s = document.getElementById("conn-mode"); s.value = "oauth2_authorization_code"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	b.fill("Connection id", "drive")
	b.fill("Name", "Drive")
	b.fill("Service", "drive")
	b.fill("Base URL", api.URL)
	b.fill("Issuer", as.URL())
	b.fill("Client id", oauthoptest.ClientID)
	b.fill("Scopes", "openid offline_access")
	b.fill("Client secret", oauthoptest.ClientSecret)
	b.press("checkbox", "One account per subject")
	b.press("button", "Add connection")
	b.said("Connection drive added.")
	b.waitFor(`document.querySelector("tr[data-connection=drive] form.connect")`, 10*time.Second)
	b.saveShot("gateway-oauth-connect", false)
	audit("a11y-gateway-oauth-connect")
	gw := eval[string](b, `document.getElementById("gateway-region").dataset.gateway`)

	step(t, "Connect alice: Chromium signs in at the provider and comes back")
	as.SignIn("alice-user")
	b.fill("Subject whose account to connect to Drive", "alice")
	b.press("button", "Connect an account to Drive")
	b.waitFor(`!!document.querySelector("[data-connected=drive]")`, 20*time.Second)
	if got := eval[string](b, `document.querySelector("[data-connected=drive]").textContent`); !strings.Contains(got, "The account of alice is connected to drive.") {
		t.Fatalf("the result page says %q", got)
	}
	done := eval[string](b, `location.href`)
	if !strings.HasPrefix(done, callback+"?") {
		t.Fatalf("the provider sent the browser to %s", done)
	}
	page := eval[string](b, `document.body.innerText`)
	for _, r := range as.RefreshTokens() {
		if strings.Contains(page, r) || strings.Contains(done, r) {
			t.Fatal("the result page shows a refresh token")
		}
	}
	b.saveShot("gateway-oauth-connected", false)
	audit("a11y-gateway-oauth-connected")

	step(t, "an agent acting for alice is served with her account")
	// The serving process reads the account the link's process stored.
	eventually(t, 10*time.Second, "alice's call served", func() bool { return signedGet(t, gwAddr, agent, "alice") == http.StatusOK })
	if a := signedGet(t, gwAddr, agent, "bob"); a != http.StatusForbidden {
		t.Fatalf("bob's call, who has no account: %d", a)
	}
	b.press("link", "Back to connect-laptop")
	b.waitFor(`document.querySelector("tr[data-connection=drive] [data-account=alice]")?.textContent.includes("connected")`, 10*time.Second)

	step(t, "the Activity page names the account that served alice's call")
	eventually(t, 20*time.Second, "alice's call on the Activity page", func() bool {
		b.open("/activity?connection=drive")
		return eval[bool](b, `[...document.querySelectorAll("[data-account]")].some(a => a.textContent === "account alice")`)
	})
	b.saveShot("activity-oauth-account", false)
	audit("a11y-activity-oauth-account")

	step(t, "attack: the redirect replayed")
	b.open(strings.TrimPrefix(done, p.w.base))
	if h := eval[string](b, `document.querySelector("h1").textContent`); h != "No connect flow in progress" {
		t.Fatalf("a replayed redirect shows %q", h)
	}

	step(t, "attack: a redirect with another issuer's iss (mix-up, RFC 9207)")
	as.SignIn("carol-user")
	redirect := providerRedirect(t, b, gw, "carol", callback)
	b.open(strings.TrimPrefix(redirect, p.w.base) + "&iss=" + url.QueryEscape("https://evil.example"))
	b.waitFor(`!!document.querySelector("[data-connect-failed=drive]")`, 10*time.Second)
	if got := eval[string](b, `document.querySelector("[data-connect-failed=drive]").textContent`); !strings.Contains(got, "iss is not the connection's issuer") {
		t.Fatalf("the mix-up page says %q", got)
	}
	b.saveShot("gateway-oauth-connect-failed", false)
	audit("a11y-gateway-oauth-connect-failed")
	// The flow is over at the gateway: the clean redirect is refused.
	b.open(strings.TrimPrefix(redirect, p.w.base))
	if h := eval[string](b, `document.querySelector("h1").textContent`); h != "No connect flow in progress" {
		t.Fatalf("the redirect after a refused one shows %q", h)
	}
	if a := signedGet(t, gwAddr, agent, "carol"); a != http.StatusForbidden {
		t.Fatalf("carol's call after a refused connect: %d", a)
	}

	step(t, "attack: a state no flow of this owner has")
	b.open("/oauth/callback?state=made-up&code=made-up")
	if h := eval[string](b, `document.querySelector("h1").textContent`); h != "No connect flow in progress" {
		t.Fatalf("a made-up state shows %q", h)
	}

	step(t, "attack: another owner relays alice's redirect, or starts a flow on her gateway")
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
	}
	p.w.post(t, "/v1/test/seed", `{"namespaces":["mallory"]}`, &seeded)
	as.SignIn("dave-user")
	redirect = providerRedirect(t, b, gw, "dave", callback)
	mallory := func(method, target, body string) (int, string) {
		req, _ := http.NewRequest(method, target, strings.NewReader(body))
		req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: seeded.Sessions["mallory"]})
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		answer, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(answer)
	}
	if status, _ := mallory("GET", strings.Replace(redirect, p.w.base, p.w.cpURL, 1), ""); status != http.StatusBadRequest {
		t.Fatalf("another owner relaying alice's redirect: %d", status)
	}
	if status, body := mallory("POST", p.w.cpURL+"/v1/gateways/"+gw+"/connect", `{"connection_id":"drive","subject":"mallory"}`); status != http.StatusNotFound ||
		!strings.Contains(body, "GATEWAY_NOT_FOUND") {
		t.Fatalf("another owner starting a flow on alice's gateway: %d %s", status, body)
	}
	// Alice's own redirect still completes: mallory's try did not use it.
	b.open(strings.TrimPrefix(redirect, p.w.base))
	b.waitFor(`!!document.querySelector("[data-connected=drive]")`, 10*time.Second)
	eventually(t, 10*time.Second, "dave's call served", func() bool { return signedGet(t, gwAddr, agent, "dave") == http.StatusOK })
}

// providerRedirect starts connecting subject's account to drive from the
// owner's page and follows the provider's sign-in outside the browser,
// up to its redirect to the control plane, which it returns unvisited.
func providerRedirect(t *testing.T, b *browser, gw, subject, callback string) string {
	t.Helper()
	start := b.apiCall("POST", "/v1/gateways/"+gw+"/connect", `{"connection_id":"drive","subject":"`+subject+`"}`)
	auth, _ := start["authorization_url"].(string)
	client := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), callback) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	res, err := client.Get(auth)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	if !strings.HasPrefix(loc, callback+"?") {
		t.Fatalf("the provider answered %d, to %q", res.StatusCode, loc)
	}
	return loc
}
