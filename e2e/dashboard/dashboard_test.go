package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/claimcache"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
)

const seedToken = "dashboard-e2e-seed-token"

// world is a control plane serving the dashboard at http://localhost:<port>
// (a secure context, so passkeys work over plain HTTP), a demo upstream,
// and a gateway in front of it whose service "weather" belongs to another
// namespace, "operator".
type world struct {
	base   string // the dashboard's origin
	cpURL  string // the same server by address, as the gateway calls it
	gwURL  string
	offset atomic.Int64 // added to the control plane's clock
	hooks  *receiver
	hook   string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{}
	ln := freePort(t)
	port := ln.Addr().(*net.TCPAddr).Port
	w.base, w.cpURL = fmt.Sprintf("http://localhost:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port)
	st, err := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(t.TempDir(), "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp, err := controlplane.New(controlplane.Config{
		Store: st, JWTSecret: bytes.Repeat([]byte("j"), 32), AllowedOrigins: []string{w.base}, InsecureLocalhostCookie: true,
		TestSeedToken: seedToken,
		// The test moves the clock forward to make verifications stale;
		// the gateway's signatures, made on the real clock, stay valid.
		SignatureMaxAge: time.Hour,
		Clock:           func() time.Time { return time.Now().Add(time.Duration(w.offset.Load())) },
		Auth:            controlplane.AuthConfig{Origins: []string{w.base}},
		Webhooks: controlplane.WebhookConfig{SecretKey: bytes.Repeat([]byte("w"), 32), InsecureAllowPrivateTargets: true,
			PollInterval: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: openapicheck.Watch(t, cp), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if err := cp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close() })
	w.hooks, w.hook = newReceiver(t)

	var seeded struct {
		APIKeys map[string]string `json:"api_keys"`
	}
	w.post(t, "/v1/test/seed", `{"services":[{"slug":"weather","name":"Weather","owner":"operator"}]}`, &seeded)
	w.gwURL = startGateway(t, w.cpURL, seeded.APIKeys["weather"])
	return w
}

// post sends a test-seed-authenticated JSON request to the control plane.
func (w *world) post(t *testing.T, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.cpURL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s: %d %s", path, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// startGateway runs a gateway whose connection "weather" reaches a demo
// upstream with a bearer token, and returns its URL once its claims
// snapshot is ready.
func startGateway(t *testing.T, cpURL, apiKey string) string {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, `{"forecast":"sunny"}`)
	}))
	t.Cleanup(upstream.Close)
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		DataDir: t.TempDir(), MasterKey: key, Admin: admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: cpURL, ServiceAPIKey: apiKey,
		Claims: claimcache.Options{TTL: 2 * time.Second, RefreshInterval: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := gw.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	ln := freePort(t)
	srv := gateway.NewServer(openapicheck.Watch(t, gw))
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { cancel(); srv.Close(); <-served; gw.Close() })
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{ID: "weather", Name: "Weather", Service: "weather",
		BaseURL: upstream.URL, AuthMode: credvault.AuthBearer, AuthSecretKey: "token"},
		map[string]string{"token": "upstream-token"}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ready, cancelReady := context.WithTimeout(ctx, 15*time.Second)
	defer cancelReady()
	if err := gw.Up(ready); err != nil {
		t.Fatal(err)
	}
	return url
}

// agentGet sends the agent's signed request through the gateway.
func (w *world) agentGet(t *testing.T, agent *identity.Identity) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.gwURL+"/proxy/weather/forecast?city=Paris", nil)
	if err := agent.Sign(req, identity.SignOptions{Subject: "alice@example.com"}); err != nil {
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

// eventually polls cond, a real request each time, within limit: the
// gateway refreshes its claims on its own clock, so there is nothing to
// await.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDashboardEndToEnd is an owner's whole life in the dashboard.
func TestDashboardEndToEnd(t *testing.T) {
	w := newWorld(t)
	b := newBrowser(t, w.base)
	started := time.Now()

	step(t, "sign up")
	{
		b.open("/signup")
		b.shot("signup")
		b.fill("Namespace", "Not A Name")
		b.press("button", "Sign up")
		if msg := b.errorText("Sign up"); !strings.Contains(msg, "NAMESPACE_INVALID") {
			t.Fatalf("error beside Sign up = %q", msg)
		}
		b.shot("signup-error")
		b.fill("Namespace", "acme")
		b.fill("Passkey name", "Laptop")
		b.press("button", "Sign up")
		b.waitFor(`location.pathname === "/claims"`, 10*time.Second)
		b.keepPasskeys()
	}

	agent, _ := identity.New("acme")
	step(t, "a claim appears and is approved")
	{
		eval[bool](b, `window.sameDocument = true`)
		status, body := w.agentGet(t, agent)
		if status != http.StatusForbidden || !strings.Contains(body, "AUTH_CLAIM_REQUIRED") {
			t.Fatalf("first agent request: %d %s", status, body)
		}
		took := b.waitFor(`document.querySelector("tr[data-status=pending]")`, 5*time.Second)
		t.Logf("the pending claim appeared %v after the gateway filed it", took.Round(time.Millisecond))
		b.said("A new claim is waiting for approval.")
		if !eval[bool](b, `window.sameDocument === true`) {
			t.Fatal("the claims page reloaded instead of updating itself")
		}
		row := eval[string](b, `document.querySelector("tr[data-status=pending]").innerText`)
		for _, want := range []string{"weather", "alice@example.com", "127.0.0.1", identity.KeyFragment(agent.PublicKey), "pending"} {
			if !strings.Contains(row, want) {
				t.Errorf("row %q lacks %q", row, want)
			}
		}
		b.shot("claims-pending")
		if len(b.named("button", "Reject ")) != 1 {
			t.Error("the pending claim offers no Reject")
		}
		b.press("button", "Approve ")
		b.waitFor(`!document.querySelector("tr[data-status=pending]")`, 5*time.Second)
		eventually(t, 10*time.Second, "the agent's approved request", func() bool {
			status, _ := w.agentGet(t, agent)
			return status == http.StatusOK
		})
	}

	step(t, "revoke asks first")
	{
		b.open("/claims?status=approved")
		b.press("button", "Revoke ")
		b.waitFor(`document.getElementById("confirm").open`, 2*time.Second)
		b.shot("claims-revoke-confirm")
		b.press("button", "Cancel")
		b.waitFor(`!document.getElementById("confirm").open`, 2*time.Second)
		if n := eval[int](b, `document.querySelectorAll("tr[data-status=approved]").length`); n != 1 {
			t.Fatalf("approved rows after cancelling = %d", n)
		}
		b.shot("claims-approved")
	}

	step(t, "reject all pending of a service")
	{
		for range 2 {
			other, _ := identity.New("acme")
			if status, _ := w.agentGet(t, other); status != http.StatusForbidden {
				t.Fatalf("unknown agent: %d", status)
			}
		}
		b.open("/claims?status=pending&service=weather")
		b.waitFor(`document.querySelectorAll("tr[data-status=pending]").length === 2`, 5*time.Second)
		b.press("button", "Reject all pending claims of weather")
		b.waitFor(`document.getElementById("confirm").open`, 2*time.Second)
		b.press("button", "Reject all")
		b.waitFor(`document.querySelectorAll("tr[data-status=pending]").length === 0`, 5*time.Second)
	}

	step(t, "phone width")
	{
		b.viewport(390, 844)
		for _, page := range []string{"/claims?status=approved", "/services", "/account", "/did"} {
			b.open(page)
			if !eval[bool](b, `document.documentElement.scrollWidth <= window.innerWidth`) {
				t.Errorf("%s scrolls sideways at 390 px: %d px wide", page, eval[int](b, `document.documentElement.scrollWidth`))
			}
		}
		b.open("/claims?status=approved")
		b.shot("claims-phone")
		b.viewport(1280, 900)
	}

	step(t, "services and API keys")
	{
		b.open("/services")
		b.fill("Name", "Weather API")
		b.fill("Service endpoint", "https://weather.example/api")
		b.press("button", "Create service")
		b.waitFor(`!document.getElementById("service-secret").hidden`, 5*time.Second)
		if key := eval[string](b, `document.getElementById("service-secret-value").value`); !strings.HasPrefix(key, "idn_sk_") {
			t.Fatalf("first API key shown = %q", key)
		}
		if when := eval[string](b, `document.getElementById("service-secret-when")?.innerText ?? ""`); !strings.Contains(when, "a gateway you paired") {
			t.Errorf("the new service's key does not say when it is needed: %q", when)
		}
		b.press("button", "Copy API key")
		b.waitFor(`document.querySelector("#service-secret p.done")`, 2*time.Second)
		b.shot("services")
		b.press("link", "Manage Weather API")
		b.waitFor(`location.pathname.startsWith("/services/svc_")`, 5*time.Second)
		b.press("button", "Create API key")
		b.waitFor(`!document.getElementById("key-secret").hidden`, 5*time.Second)
		b.waitFor(`document.querySelectorAll("#keys-region tbody tr").length === 2`, 2*time.Second)
		nodes := b.named("button", "Revoke key ")
		if len(nodes) != 2 {
			t.Fatalf("%d Revoke key buttons, want 2", len(nodes))
		}
		b.callOn(nodes[0], `function() { this.click(); }`)
		b.waitFor(`document.getElementById("confirm").open`, 2*time.Second)
		b.press("button", "Revoke key")
		b.waitFor(`document.querySelectorAll("#keys-region .badge.revoked").length === 1`, 5*time.Second)
	}

	step(t, "webhooks")
	{
		b.fill("Webhook URL", "https://user:secret@hooks.example/idn")
		b.press("button", "Add webhook")
		if msg := b.errorText("Add webhook"); !strings.Contains(msg, "credentials") || !strings.Contains(msg, "VALIDATION_ERROR") {
			t.Fatalf("error beside Add webhook = %q", msg)
		}
		b.fill("Webhook URL", w.hook)
		b.press("button", "Add webhook")
		b.waitFor(`!document.getElementById("hook-secret").hidden`, 5*time.Second)
		if s := eval[string](b, `document.getElementById("hook-secret-value").value`); !strings.HasPrefix(s, "whsec_") {
			t.Fatalf("webhook secret shown = %q", s)
		}
		if len(b.named("button", "Delete webhook")) != 1 {
			t.Error("the webhook offers no Delete webhook")
		}
		b.press("button", "Send test event")
		eventually(t, 10*time.Second, "the test event at the receiver", func() bool { return w.hooks.count(controlplane.EventWebhookTest) == 1 })
		eventually(t, 5*time.Second, "the delivered test event in the list", func() bool {
			b.open(strings.TrimPrefix(eval[string](b, "location.href"), w.base))
			return eval[bool](b, `[...document.querySelectorAll("#hooks-region tr")].some(r => r.innerText.includes("webhook.test") && r.innerText.includes("delivered"))`)
		})
		b.shot("service")
	}

	step(t, "passkeys with step-up")
	{
		w.offset.Store(int64(6 * time.Minute)) // the sign-up's verification is now stale
		b.open("/account")
		b.waitFor(`!document.getElementById("sessions").hidden`, 5*time.Second)
		b.shot("account")
		before := b.ceremony.Load()
		b.fill("Passkey name", "Backup key")
		b.press("button", "Add passkey")
		b.waitFor(`document.querySelectorAll("#passkeys-region tbody tr").length === 2 || document.querySelector("p.err")`, 15*time.Second)
		if msg := eval[string](b, `document.querySelector("p.err")?.textContent ?? ""`); msg != "" {
			t.Fatalf("adding a passkey failed: %s", msg)
		}
		if n := b.ceremony.Load() - before; n < 2 {
			t.Errorf("adding a stale session's passkey ran %d ceremonies, want a verification and a registration", n)
		}
		before = b.ceremony.Load()
		b.tabTo("Remove passkey Backup key")
		b.do(chromedp.KeyEvent(kb.Enter))
		b.confirmByKeyboard("Remove passkey")
		b.waitFor(`document.querySelectorAll("#passkeys-region tbody tr").length === 1 || document.querySelector("p.err")`, 15*time.Second)
		if msg := eval[string](b, `document.querySelector("p.err")?.textContent ?? ""`); msg != "" {
			t.Fatalf("removing the passkey failed: %s", msg)
		}
		if b.ceremony.Load() == before {
			t.Error("removing a passkey right after adding one needed no new verification")
		}
		b.said("Passkey “Backup key” removed.")
		b.wantHeading("the last Remove passkey", "Passkeys")
		if len(b.named("button", "Remove passkey")) != 0 {
			t.Error("the last passkey offers Remove passkey")
		}
	}

	step(t, "log out and in by keyboard")
	{
		b.press("button", "Log out")
		b.waitFor(`location.pathname === "/login"`, 5*time.Second)
		b.shot("login")
		if len(b.named("button", "Log in")) != 1 || len(b.named("textbox", "Namespace")) != 1 {
			t.Error("the login page lacks its Namespace field or Log in button")
		}
		b.restorePasskeys()
		for range 6 {
			if eval[string](b, `document.activeElement.id`) == "namespace" {
				break
			}
			b.do(chromedp.KeyEvent(kb.Tab))
		}
		if eval[string](b, `document.activeElement.id`) != "namespace" {
			t.Fatal("Tab does not reach the Namespace field")
		}
		b.do(chromedp.KeyEvent("acme" + kb.Enter))
		b.waitFor(`location.pathname === "/claims"`, 10*time.Second)
	}

	step(t, "DID document")
	{
		b.press("link", "DID document")
		b.waitFor(`location.pathname === "/did"`, 5*time.Second)
		if doc := eval[string](b, `document.querySelector("pre").textContent`); !strings.Contains(doc, `"id": "did:idn:acme"`) ||
			!strings.Contains(doc, identity.KeyFragment(agent.PublicKey)) {
			t.Fatalf("DID document = %s", doc)
		}
		b.shot("did")
	}

	step(t, "delete account")
	{
		w.offset.Store(int64(12 * time.Minute)) // the login's verification is stale too
		b.open("/account")
		b.fill("Type acme to confirm", "acm")
		b.press("button", "Delete account")
		if msg := b.errorText("Delete account"); !strings.Contains(msg, "Type acme exactly") {
			t.Fatalf("error beside Delete account = %q", msg)
		}
		b.fill("Type acme to confirm", "acme")
		b.press("button", "Delete account")
		b.waitFor(`location.pathname === "/login"`, 15*time.Second)
		b.waitForText("#flash", "The account acme has been deleted.")
		res, err := http.Get(w.cpURL + "/1.0/identifiers/did:idn:acme")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusGone {
			t.Fatalf("the deleted namespace's DID resolves with %d, want 410", res.StatusCode)
		}
	}

	step(t, "one-time sign-in link")
	{
		var link struct {
			URL string `json:"url"`
		}
		w.post(t, "/v1/test/signin-links", `{"namespace":"operator","next":"/services"}`, &link)
		b.do(chromedp.Navigate(strings.Replace(link.URL, w.cpURL, w.base, 1)))
		b.waitFor(`location.pathname === "/services"`, 5*time.Second)
		if strings.Contains(eval[string](b, "location.href"), "idn_sl_") {
			t.Error("the sign-in token stays in the address bar")
		}
		if ns := eval[string](b, `document.body.dataset.namespace`); ns != "operator" {
			t.Fatalf("signed in as %q", ns)
		}
		b.do(chromedp.Navigate(strings.Replace(link.URL, w.cpURL, w.base, 1)))
		if msg := b.waitForText(`#signin-status`, "SIGNIN_LINK_INVALID"); msg == "" {
			t.Fatal("a used link signed in again")
		}
	}
	t.Logf("browser suite ran in %v", time.Since(started).Round(time.Millisecond))
}

// waitForText waits until the element of sel contains want and returns
// its text.
func (b *browser) waitForText(sel, want string) string {
	b.t.Helper()
	b.waitFor(`(document.querySelector(`+jsString(sel)+`)?.textContent ?? "").includes(`+jsString(want)+`)`, 5*time.Second)
	return eval[string](b, `document.querySelector(`+jsString(sel)+`).textContent`)
}

// step names the part of the scenario that follows, in the test log.
func step(t *testing.T, name string) {
	t.Helper()
	t.Logf("step: %s", name)
}

// TestEndedSessionSaysSo: an action after the session ended (a logout in
// another tab) says so beside the control, which the dashboard can only
// tell from the answer's code (errcode.js), not from its message.
func TestEndedSessionSaysSo(t *testing.T) {
	w := newWorld(t)
	b := newBrowser(t, w.base)
	b.open("/signup")
	b.fill("Namespace", "acme")
	b.fill("Passkey name", "Laptop")
	b.press("button", "Sign up")
	b.waitFor(`location.pathname === "/claims"`, 10*time.Second)
	b.open("/services")
	b.apiCall("POST", "/v1/auth/logout", "")
	b.fill("Name", "Weather API")
	b.fill("Service endpoint", "https://weather.example/api")
	b.press("button", "Create service")
	if msg := b.errorText("Create service"); !strings.Contains(msg, "Your session has ended: log in again") || !strings.Contains(msg, "ADMIN_UNAUTHORIZED") {
		t.Fatalf("error beside Create service = %q", msg)
	}
}
