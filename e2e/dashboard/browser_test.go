// Package dashboard_test drives the owner dashboard in a real Chromium
// (chromedp) against a real control plane and a gateway composed by
// package gateway, with a CDP virtual authenticator standing in for the
// owner's passkeys.
//
// Where Chromium is missing the suite skips with the reason; with CI=true
// it fails instead. Screenshots of every page go to $IDN_TEST_ARTIFACTS
// (else a temporary directory); IDN_UPDATE_SCREENSHOTS=1 also refreshes
// the set in docs/screenshots that the README shows.
package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
)

// chromium returns the browser to drive, skipping (or, under CI, failing)
// the test when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("IDN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("Chromium is missing but CI=true: the dashboard's browser tests must run in CI (.ci/run installs the chromium package)")
	}
	t.Skip("dashboard browser tests skipped: no chromium on PATH (apt-get install chromium, or set IDN_CHROMIUM)")
	return ""
}

// browser is one headless Chromium tab with a virtual authenticator.
type browser struct {
	t        *testing.T
	ctx      context.Context
	base     string // the dashboard origin
	auth     webauthn.AuthenticatorID
	shots    string // artifact directory
	shotSeq  int
	mu       sync.Mutex
	keep     []*webauthn.Credential // the owner's established passkey
	added    []*webauthn.Credential // the passkey registered last
	ceremony atomic.Int32           // passkey ceremonies the test steered
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// No network here: keep Chromium from trying to reach anything.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })

	b := &browser{t: t, ctx: ctx, base: base, shots: artifactDir(t)}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21,
			Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.auth = res.AuthenticatorID
	// Every page records what the CSP blocked and what the scripts threw,
	// so each screenshot can assert that nothing did.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.pageProblems = [];
		addEventListener("securitypolicyviolation", e => pageProblems.push("CSP blocked " + e.violatedDirective + " " + e.blockedURI));
		addEventListener("error", e => pageProblems.push("error: " + e.message));
		addEventListener("unhandledrejection", e => pageProblems.push("unhandled rejection: " + e.reason));`}); err != nil {
		t.Fatal(err)
	}
	b.steerCeremonies()
	return b
}

func artifactDir(t *testing.T) string {
	dir := os.Getenv("IDN_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// steerCeremonies plays the owner holding two authenticators, one with
// the account's established passkey and one for a new passkey. A single
// virtual authenticator holds at most what the next ceremony needs, set
// while its options request is paused: before a verification, only the
// established passkey (a passkey younger than a day cannot confirm
// anything); before a registration, nothing (the browser refuses to
// register on an authenticator that already holds a listed passkey);
// before signing a passkey change for the gateways, the established one,
// the new one being remembered (holdAdded).
func (b *browser) steerCeremonies() {
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/v1/auth/verify/options*"}, {URLPattern: "*/v1/auth/passkeys/options*"},
		{URLPattern: "*/v1/auth/passkeys/gateways*"},
	}}); err != nil {
		b.t.Fatal(err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			keys := strings.Contains(ev.Request.URL, "/v1/auth/passkeys/gateways")
			if keys && ev.Request.Method != "GET" { // sending the signed change: no ceremony
				if _, err := chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID}); err != nil && b.ctx.Err() == nil {
					b.t.Errorf("continue request: %v", err)
				}
				continue
			}
			b.ceremony.Add(1)
			if keys {
				b.rememberAdded()
			}
			if err := b.hold(keys || strings.Contains(ev.Request.URL, "/v1/auth/verify/options")); err != nil {
				b.t.Errorf("set the authenticator's passkeys: %v", err)
			}
			if _, err := chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID}); err != nil && b.ctx.Err() == nil {
				b.t.Errorf("continue request: %v", err)
			}
		}
	}()
}

// hold leaves the authenticator holding the established passkey (with its
// current signature counter, which the control plane checks) or nothing.
func (b *browser) hold(established bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	res, err := chromedp.Call(b.ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: b.auth})
	if err != nil {
		return err
	}
	for _, c := range res.Credentials {
		for i, k := range b.keep {
			if bytes.Equal(c.CredentialID, k.CredentialID) {
				b.keep[i].SignCount = c.SignCount
			}
		}
	}
	if _, err := chromedp.Call(b.ctx, webauthn.ClearCredentials, webauthn.ClearCredentialsParams{AuthenticatorID: b.auth}); err != nil {
		return err
	}
	if !established {
		return nil
	}
	for _, k := range b.keep {
		if _, err := chromedp.Call(b.ctx, addCredential, addCredentialParams{AuthenticatorID: b.auth, Credential: storedCredential{
			CredentialID: k.CredentialID, IsResidentCredential: k.IsResidentCredential, RpID: k.RpID,
			PrivateKey: k.PrivateKey, UserHandle: k.UserHandle, SignCount: k.SignCount,
		}}); err != nil {
			return err
		}
	}
	return nil
}

// rememberAdded keeps what the authenticator holds after a registration:
// the passkey just added.
func (b *browser) rememberAdded() {
	res, err := chromedp.Call(b.ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: b.auth})
	if err != nil {
		b.t.Errorf("read the added passkey: %v", err)
		return
	}
	b.mu.Lock()
	b.added = res.Credentials
	b.mu.Unlock()
}

// holdAdded leaves the authenticator holding only the passkey added last,
// so the next assertion is made with it.
func (b *browser) holdAdded() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.added) != 1 {
		b.t.Fatalf("the authenticator held %d passkeys after the registration", len(b.added))
	}
	if _, err := chromedp.Call(b.ctx, webauthn.ClearCredentials, webauthn.ClearCredentialsParams{AuthenticatorID: b.auth}); err != nil {
		b.t.Fatal(err)
	}
	k := b.added[0]
	if _, err := chromedp.Call(b.ctx, addCredential, addCredentialParams{AuthenticatorID: b.auth, Credential: storedCredential{
		CredentialID: k.CredentialID, IsResidentCredential: k.IsResidentCredential, RpID: k.RpID,
		PrivateKey: k.PrivateKey, UserHandle: k.UserHandle, SignCount: k.SignCount,
	}}); err != nil {
		b.t.Fatal(err)
	}
}

// addCredential is WebAuthn.addCredential with only the fields a passkey
// needs: Chromium refuses the generated parameters, which always carry
// generateCmtgKeyOnNextOperation, on an authenticator without CMTG keys.
var addCredential = cdp.Command[addCredentialParams, cdp.Empty]{Method: webauthn.CommandAddCredential}

type addCredentialParams struct {
	AuthenticatorID webauthn.AuthenticatorID `json:"authenticatorId"`
	Credential      storedCredential         `json:"credential"`
}

type storedCredential struct {
	CredentialID         []byte  `json:"credentialId"`
	IsResidentCredential bool    `json:"isResidentCredential"`
	RpID                 string  `json:"rpId"`
	PrivateKey           []byte  `json:"privateKey"`
	UserHandle           []byte  `json:"userHandle,omitempty"`
	SignCount            float64 `json:"signCount"`
}

// keepPasskeys remembers the passkey the authenticator holds now as the
// owner's established one.
func (b *browser) keepPasskeys() {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: b.auth})
	if err != nil || len(res.Credentials) != 1 {
		b.t.Fatalf("credentials after sign-up: %v %v", res, err)
	}
	b.mu.Lock()
	b.keep = res.Credentials
	b.mu.Unlock()
}

// restorePasskeys puts the established passkey back, for a login.
func (b *browser) restorePasskeys() {
	b.t.Helper()
	if err := b.hold(true); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
	b.waitFor(`document.readyState === "complete"`, 5*time.Second)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds, across page loads.
func (b *browser) waitFor(cond string, limit time.Duration) time.Duration {
	b.t.Helper()
	start := time.Now()
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			b.t.Fatalf("timed out after %v waiting for %s (last error %v) on %s", limit, cond, err, eval[string](b, "location.href"))
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatal(b.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *browser) path() string { return eval[string](b, "location.pathname") }

// named returns the backend nodes whose accessible role is role and whose
// accessible name starts with prefix, as Chromium's accessibility tree
// computes them.
func (b *browser) named(role, prefix string) []cdp.BackendNodeID {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	var out []cdp.BackendNodeID
	for _, n := range res.Nodes {
		if n.Ignored || n.Role == nil || n.Name == nil {
			continue
		}
		var r, name string
		_ = json.Unmarshal([]byte(n.Role.Value), &r)
		_ = json.Unmarshal([]byte(n.Name.Value), &name)
		if r == role && strings.HasPrefix(name, prefix) {
			out = append(out, n.BackendDOMNodeID)
		}
	}
	return out
}

// press clicks the one control whose accessible name starts with prefix.
func (b *browser) press(role, prefix string) {
	b.t.Helper()
	nodes := b.named(role, prefix)
	if len(nodes) != 1 {
		b.t.Fatalf("%d %ss named %q…, want 1 on %s", len(nodes), role, prefix, b.path())
	}
	b.callOn(nodes[0], `function() { this.scrollIntoView({block: "center"}); this.click(); }`)
}

func (b *browser) callOn(node cdp.BackendNodeID, fn string) {
	b.t.Helper()
	obj, err := chromedp.Call(b.ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: node})
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, runtime.CallFunctionOn, runtime.CallFunctionOnParams{
		FunctionDeclaration: fn, ObjectID: obj.Object.ObjectID, UserGesture: new(true)}); err != nil {
		b.t.Fatal(err)
	}
}

// fill types into the input labelled label (its accessible name): a text
// box, or one with suggestions (a combobox).
func (b *browser) fill(label, value string) {
	b.t.Helper()
	nodes := b.named("textbox", label)
	if len(nodes) == 0 {
		nodes = b.named("combobox", label)
	}
	if len(nodes) != 1 {
		b.t.Fatalf("%d text boxes labelled %q on %s", len(nodes), label, b.path())
	}
	b.callOn(nodes[0], `function() { this.focus(); this.value = ""; }`)
	b.do(chromedp.KeyEvent(value))
}

// errorText waits for the error shown beside the control named prefix.
// The error may come from a gateway's upstream through the relay, which
// under the race detector and a full test run takes seconds.
func (b *browser) errorText(prefix string) string {
	b.t.Helper()
	b.waitFor(`[...document.querySelectorAll("p.err")].some(p => p.textContent)`, 20*time.Second)
	return eval[string](b, `[...document.querySelectorAll("button")].filter(x => (x.getAttribute("aria-label") || x.textContent).startsWith(`+
		jsString(prefix)+`)).map(x => document.getElementById(x.getAttribute("aria-describedby") || "")?.textContent || "").join("")`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// shot saves a PNG of the page as a test artifact, and, with
// IDN_UPDATE_SCREENSHOTS=1, under docs/screenshots.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.saveShot(name, os.Getenv("IDN_UPDATE_SCREENSHOTS") == "1")
}

// saveShot saves a PNG of the page as a test artifact, and under
// docs/screenshots when docs is set.
func (b *browser) saveShot(name string, docs bool) {
	b.t.Helper()
	b.waitFor(`document.readyState === "complete" && document.body.getBoundingClientRect().height > 0`, 5*time.Second)
	if problems := eval[[]string](b, `window.pageProblems ?? []`); len(problems) > 0 {
		b.t.Errorf("%s: %v", name, problems)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	b.shotSeq++
	if err := os.WriteFile(filepath.Join(b.shots, fmt.Sprintf("%02d-%s.png", b.shotSeq, name)), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if docs {
		// The README's set stays small: a page too long for that shows
		// its first screen.
		if len(png) > docsShotLimit {
			if png, err = chromedp.Run(b.ctx, chromedp.CaptureScreenshot()); err != nil {
				b.t.Fatal(err)
			}
		}
		if len(png) > docsShotLimit {
			b.t.Errorf("screenshot %s is %d bytes, over the %d of docs/screenshots", name, len(png), docsShotLimit)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "screenshots", name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// docsShotLimit is the most a screenshot in docs/screenshots may weigh.
const docsShotLimit = 150 << 10

// viewport sets the page's viewport in CSS pixels (390 × 844 is a phone).
func (b *browser) viewport(width, height int64) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(width, height))
}

// freePort is a loopback address for a server that must know its own URL
// before it starts.
func freePort(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// receiver counts webhook deliveries by event type.
type receiver struct {
	mu  sync.Mutex
	got map[string]int
}

func newReceiver(t *testing.T) (*receiver, string) {
	rc := &receiver{got: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Type string `json:"type"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		rc.mu.Lock()
		rc.got[p.Type]++
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ts.Close)
	return rc, ts.URL + "/idn-events"
}

func (rc *receiver) count(typ string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[typ]
}
