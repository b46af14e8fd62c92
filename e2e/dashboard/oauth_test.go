package dashboard_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/e2e/internal/oauthoptest"
	"github.com/idnhq/idn/identity"
)

// TestGatewayOAuthAccounts: the owner adds an owner-connected OAuth
// connection with one account per subject from the gateway page, against
// a real OpenID provider. Two subjects connect their accounts (with
// gateway connect); the page lists them, never a token. The provider
// forgets bob's refresh token: the page names the connection that needs
// reconnecting. Disconnect removes alice's account and revokes its token
// at the provider. The pages pass the accessibility checks.
func TestGatewayOAuthAccounts(t *testing.T) {
	chromium(t)
	ln := freePort(t)
	callback := ln.Addr().String()
	ln.Close()
	as := oauthoptest.New(t, "http://"+callback+"/callback")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := as.UserOf(r.Header.Get("Authorization"))
		if !ok {
			http.Error(w, "unknown token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "files of %s", user)
	}))
	t.Cleanup(api.Close)

	agent, err := identity.New("agent-drive")
	if err != nil {
		t.Fatal(err)
	}
	p := pairFromDashboard(t, agent, "drive", "Drive", "oauth-laptop")
	b, audit, bin, env, gwAddr := p.b, p.audit, p.bin, p.env, p.addr

	step(t, "the OAuth fields show for the OAuth modes only")
	shown := func(id string) bool {
		return eval[bool](b, fmt.Sprintf(`document.getElementById(%q).checkVisibility()`, id))
	}
	if shown("conn-client-id") || !shown("conn-header") {
		t.Fatal("OAuth fields show for a bearer connection")
	}
	choose := func(value string) {
		t.Helper()
		eval[bool](b, fmt.Sprintf(`(() => { const s = document.getElementById("conn-mode"); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, value))
	}
	choose(credvault.AuthOAuth2ClientCredentials)
	if !shown("conn-token-url") || shown("conn-issuer") || shown("conn-header") || !eval[bool](b, `document.getElementById("conn-secret").required`) {
		t.Fatal("client credentials: want the token URL and a required client secret, no issuer or header name")
	}
	choose(credvault.AuthOAuth2AuthorizationCode)
	if !shown("conn-issuer") || eval[bool](b, `document.getElementById("conn-secret").required`) {
		t.Fatal("authorization code: want the issuer, and an optional client secret")
	}
	b.saveShot("gateway-oauth-form", false)
	audit("a11y-gateway-oauth-form")

	step(t, "add the connection from the form")
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
	b.waitFor(`document.querySelector("tr[data-connection=drive]")?.textContent.includes("No account connected.")`, 10*time.Second)
	c := rpcResult(t, b, "connections.get", `{"id":"drive"}`)
	if c["oauth_issuer"] != as.URL() || c["oauth_client_id"] != oauthoptest.ClientID || c["oauth_per_subject"] != true ||
		fmt.Sprint(c["oauth_scopes"]) != "[openid offline_access]" || c["auth_secret_key"] != "client_secret" {
		t.Fatalf("the connection the form made: %v", c)
	}

	step(t, "alice and bob connect their accounts")
	connect := func(subject string) string {
		t.Helper()
		before := as.RefreshTokens()
		cmd := exec.Command(bin, "connect", "drive", "--subject", subject, "--listen", callback)
		cmd.Env = env
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		lines := bufio.NewScanner(out)
		var link string
		for lines.Scan() {
			if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, as.URL()) {
				link = l
			}
			if strings.HasPrefix(lines.Text(), "Waiting") {
				break
			}
		}
		as.SignIn(subject + "-user")
		res, err := http.Get(link)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("the provider's sign-in for %s: %v %v", subject, err, res)
		}
		res.Body.Close()
		rest, _ := io.ReadAll(out)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("gateway connect --subject %s: %v: %s", subject, err, rest)
		}
		for _, r := range as.RefreshTokens() {
			if !slices.Contains(before, r) {
				return r
			}
		}
		t.Fatalf("no refresh token issued for %s", subject)
		return ""
	}
	aliceRefresh, bobRefresh := connect("alice"), connect("bob")
	accounts := `[...document.querySelectorAll("tr[data-connection=drive] [data-account]")].map(a => a.dataset.account + " " + a.querySelector(".badge").textContent)`
	reloadUntil := func(what, cond string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() bool {
			b.open(b.path())
			b.waitFor(`document.querySelector("tr[data-connection=drive]")`, 10*time.Second)
			return eval[bool](b, "!!("+cond+")")
		})
	}
	reloadUntil("both accounts listed", accounts+`.join() === "alice connected,bob connected"`)
	page := eval[string](b, `document.body.innerText`)
	for _, secret := range []string{aliceRefresh, bobRefresh, oauthoptest.ClientSecret} {
		if strings.Contains(page, secret) {
			t.Fatal("the page shows a secret")
		}
	}
	b.saveShot("gateway-oauth-accounts", false)
	audit("a11y-gateway-oauth-accounts")

	step(t, "the provider forgets bob's refresh token: the page says to reconnect")
	if a := signedGet(t, gwAddr, agent, "bob"); a != 200 {
		t.Fatalf("bob's call before: %d", a)
	}
	// The call rotated bob's refresh token: the live one not alice's.
	live := slices.DeleteFunc(as.RefreshTokens(), func(r string) bool { return r == aliceRefresh })
	if len(live) != 1 || live[0] == bobRefresh {
		t.Fatalf("after bob's call, %d other refresh tokens, want bob's rotated one", len(live))
	}
	as.ExpireAccess()
	as.Forget(live[0])
	signedGet(t, gwAddr, agent, "bob") // the upstream's 401: the retry's refresh is refused
	if a := signedGet(t, gwAddr, agent, "bob"); a != http.StatusForbidden {
		t.Fatalf("bob's call with a forgotten refresh token: %d", a)
	}
	reloadUntil("bob's account needing reconnecting", `document.querySelector("[data-reconnect=drive]")`)
	if got := eval[string](b, `document.querySelector("[data-reconnect=drive]").textContent`); !strings.Contains(got, "Drive needs reconnecting.") ||
		!strings.Contains(got, "gateway connect drive --subject bob") {
		t.Fatalf("the banner says %q", got)
	}
	if got := eval[[]string](b, accounts); !slices.Equal(got, []string{"alice connected", "bob needs reconnecting"}) {
		t.Fatalf("the accounts show %q", got)
	}
	b.saveShot("gateway-oauth-reconnect", false)
	audit("a11y-gateway-oauth-reconnect")

	step(t, "Disconnect alice: the provider revokes her token")
	b.press("button", "Disconnect alice of Drive")
	b.confirmByKeyboard("Disconnect")
	b.said("Disconnected alice from Drive; the provider revoked its token.")
	if as.HasRefresh(aliceRefresh) {
		t.Fatal("alice's refresh token is still live at the provider")
	}
	if got := eval[[]string](b, accounts); !slices.Equal(got, []string{"bob needs reconnecting"}) {
		t.Fatalf("after Disconnect the accounts show %q", got)
	}
	if a := signedGet(t, gwAddr, agent, "alice"); a != http.StatusForbidden {
		t.Fatalf("alice's call after Disconnect: %d", a)
	}
}

// signedGet calls the drive connection through the gateway as the agent
// acting for subject and returns the status.
func signedGet(t *testing.T, gwAddr string, agent *identity.Identity, subject string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+gwAddr+"/proxy/drive/files", nil)
	if err := agent.Sign(req, identity.SignOptions{Subject: subject}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
