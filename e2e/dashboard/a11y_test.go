package dashboard_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testnode"
)

// axeSource is axe-core's browser bundle from the pinned packages of
// kit/testnode, skipping (or, under CI, failing) the test without
// them.
func axeSource(t *testing.T) string {
	t.Helper()
	modules, _ := testnode.Modules(t, "the accessibility checks (axe-core)")
	src, err := os.ReadFile(filepath.Join(modules, "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// axeTags are the rules the dashboard meets: WCAG 2.0, 2.1 and 2.2, A and
// AA, and axe's best practices.
const axeTags = `["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]`

// The widths every page is checked at: a laptop and a phone.
var auditWidths = []struct {
	name          string
	width, height int64
}{{"1280", 1280, 900}, {"390", 390, 844}}

// audit checks the open page at each width: no axe-core violation of
// impact moderate or above, a focus ring of at least 3:1 against the
// background behind it on every control Tab reaches, buttons and fields
// whose edges stand out by 3:1, and tables whose column headers stay in
// the accessibility tree. It saves a screenshot at
// each width (a test artifact, never in docs) and leaves the laptop width
// set.
func (b *browser) audit(name, axe string) {
	b.t.Helper()
	defer b.viewport(1280, 900)
	for _, w := range auditWidths {
		b.viewport(w.width, w.height)
		b.waitFor(`document.readyState === "complete"`, 5*time.Second)
		where := fmt.Sprintf("%s at %s px", name, w.name)
		if !eval[bool](b, `typeof axe === "object"`) {
			eval[bool](b, axe+"\n;true")
		}
		var result struct {
			Violations    []string
			Minor, Passed int
		}
		raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: "tag", values: `+axeTags+`}})
			.then(r => JSON.stringify({
				violations: r.violations.filter(v => v.impact !== "minor")
					.flatMap(v => v.nodes.map(n => v.impact + " " + v.id + ": " + n.target.join(" ") + ": " + n.failureSummary.replace(/\s+/g, " "))),
				minor: r.violations.filter(v => v.impact === "minor").length,
				passed: r.passes.length}))`,
			chromedp.EvalAwaitPromise))
		if err != nil {
			b.t.Fatalf("%s: axe: %v", where, err)
		}
		if err := json.Unmarshal([]byte(raw), &result); err != nil {
			b.t.Fatal(err)
		}
		for _, v := range result.Violations {
			b.t.Errorf("%s: %s", where, v)
		}
		b.t.Logf("%s: axe passed %d rules; %d minor violations", where, result.Passed, result.Minor)
		b.checkFocusRings(where)
		b.checkTableHeaders(where)
		b.saveShot(name+"-"+w.name, false)
	}
}

// contrastJS defines, in the page, the WCAG 2 contrast ratio of two CSS
// colours and the opaque background an element is drawn on.
const contrastJS = `
window.contrast ??= (() => {
  const rgba = (c) => { const m = c.match(/[\d.]+/g).map(Number); return m.length === 3 ? [...m, 1] : m; };
  const lum = ([r, g, b]) => [r, g, b].map((v) => v / 255).map((v) => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  // background is what el's ancestors paint behind it, their
  // translucent layers blended over the canvas.
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] === 1) break;
    }
    return layers.reverse().reduce((under, [r, g, b, a]) => [r * a + under[0] * (1 - a), g * a + under[1] * (1 - a), b * a + under[2] * (1 - a)], [255, 255, 255]);
  };
  const ratio = (fg, bg) => { const [x, y] = [lum(fg), lum(bg)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const over = ([r, g, b, a], [R, G, B]) => [r * a + R * (1 - a), g * a + G * (1 - a), b * a + B * (1 - a)];
  // edge is the contrast that shows where a control is against what is
  // around it: its fill or its border, whichever stands out more.
  const edge = (el) => {
    const cs = getComputedStyle(el), around = background(el.parentElement);
    const fill = ratio(over(rgba(cs.backgroundColor), around), around);
    const border = parseFloat(cs.borderTopWidth) >= 1 && cs.borderTopStyle !== "none" ? ratio(over(rgba(cs.borderTopColor), around), around) : 1;
    return Math.max(fill, border);
  };
  return { rgba, background, ratio, edge };
})();
true`

// checkFocusRings presses Tab through the page from its skip link and checks
// the ring each control shows: an outline at least 2 px wide whose colour
// has 3:1 against the background around the control (the outline sits
// outside it, on its parent's background). A button or a field must also
// stand out from that background by 3:1, with its fill or its border
// (axe checks the contrast of text, not of a control's edge).
func (b *browser) checkFocusRings(where string) {
	b.t.Helper()
	eval[bool](b, contrastJS)
	seen := map[string]bool{}
	lowest := math.Inf(1)
	for i := range 150 {
		if i == 0 {
			// Every page starts with its skip link: there, then by
			// keyboard to the next control and back.
			eval[bool](b, `(document.querySelector("a.skip").focus(), true)`)
			b.do(chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
		} else {
			b.do(chromedp.KeyEvent(kb.Tab))
		}
		var ring struct {
			Key, Name, Style, Color, Background string
			Width, Ratio, Edge                  float64
			Visible                             bool
		}
		raw := eval[string](b, `JSON.stringify((() => {
			const el = document.activeElement;
			if (!el || el === document.body) return null;
			const cs = getComputedStyle(el);
			const bg = contrast.background(el.parentElement);
			const path = []; for (let e = el; e && e !== document.body; e = e.parentElement) path.push(e.tagName + [...(e.parentElement?.children ?? [])].indexOf(e));
			return { key: path.join("/"), name: (el.getAttribute("aria-label") || el.textContent || el.id || el.tagName).trim().slice(0, 60),
				style: cs.outlineStyle, color: cs.outlineColor, background: "rgb(" + bg.map(Math.round).join(", ") + ")",
				width: parseFloat(cs.outlineWidth), ratio: contrast.ratio(contrast.rgba(cs.outlineColor), bg), visible: el.matches(":focus-visible"),
				edge: el.matches("button, a.button, select, textarea, input:not([type=checkbox], [type=radio])") ? contrast.edge(el) : 0 };
		})())`)
		if raw == "null" {
			break
		}
		if err := json.Unmarshal([]byte(raw), &ring); err != nil {
			b.t.Fatal(err)
		}
		if seen[ring.Key] {
			break
		}
		seen[ring.Key] = true
		if !ring.Visible || ring.Style == "none" || ring.Width < 2 {
			b.t.Errorf("%s: %q shows no focus ring (focus-visible %v, outline %s %v px)", where, ring.Name, ring.Visible, ring.Style, ring.Width)
			continue
		}
		lowest = min(lowest, ring.Ratio)
		if ring.Ratio < 3 {
			b.t.Errorf("%s: the focus ring of %q, %s on %s, has contrast %.2f:1, under 3:1", where, ring.Name, ring.Color, ring.Background, ring.Ratio)
		}
		if ring.Edge > 0 && ring.Edge < 3 {
			b.t.Errorf("%s: the edge of %q (its fill or border) has contrast %.2f:1 on %s, under 3:1", where, ring.Name, ring.Edge, ring.Background)
		}
	}
	if len(seen) == 0 {
		b.t.Errorf("%s: Tab reaches no control", where)
	}
	b.t.Logf("%s: %d focus rings checked, the lowest contrast %.2f:1", where, len(seen), lowest)
	// The skip link, shown while focused, would cover the header.
	eval[bool](b, `(document.activeElement?.blur(), true)`)
}

// checkTableHeaders asserts, from Chromium's accessibility tree, that
// every data table of the page keeps its column headers and cells. A
// table in a closed disclosure is out of the tree until it opens.
func (b *browser) checkTableHeaders(where string) {
	b.t.Helper()
	tables := eval[int](b, `[...document.querySelectorAll("main table")].filter(t => t.checkVisibility()).length`)
	if tables == 0 {
		return
	}
	res, err := chromedp.Call(b.ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	roles := map[string]int{}
	for _, n := range res.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		var r string
		_ = json.Unmarshal([]byte(n.Role.Value), &r)
		roles[r]++
	}
	if roles["table"] != tables || roles["columnheader"] < tables || roles["cell"] == 0 && roles["gridcell"] == 0 {
		b.t.Errorf("%s: %d tables in the page, but the accessibility tree has %d tables, %d column headers, %d cells",
			where, tables, roles["table"], roles["columnheader"], roles["cell"]+roles["gridcell"])
	}
}

// focused names the control that has the keyboard focus: its accessible
// label, else its text, else its tag.
func (b *browser) focused() string {
	return eval[string](b, `(() => { const el = document.activeElement; return (el.getAttribute("aria-label") || el.textContent || el.tagName).trim(); })()`)
}

// tabTo presses Tab until the focused control's name starts with prefix.
func (b *browser) tabTo(prefix string) {
	b.t.Helper()
	for range 150 {
		if strings.HasPrefix(b.focused(), prefix) {
			return
		}
		b.do(chromedp.KeyEvent(kb.Tab))
	}
	b.t.Fatalf("Tab does not reach %q on %s", prefix, b.path())
}

// said waits for the page's polite live region to say want, and checks
// the assertive one says nothing.
func (b *browser) said(want string) {
	b.t.Helper()
	const polite = `document.getElementById("live-status").textContent`
	for deadline := time.Now().Add(10 * time.Second); eval[string](b, polite) != want; {
		if time.Now().After(deadline) {
			b.t.Fatalf("the polite live region says %q, not %q; the assertive one %q", eval[string](b, polite), want,
				eval[string](b, `document.getElementById("live-alert").textContent`))
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatal(b.ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if alert := eval[string](b, `document.getElementById("live-alert").textContent`); alert != "" {
		b.t.Fatalf("the assertive live region says %q (waiting for %q)", alert, want)
	}
}

// confirmByKeyboard moves to the dialog's confirming button and presses
// Enter.
func (b *browser) confirmByKeyboard(verb string) {
	b.t.Helper()
	b.waitFor(`document.getElementById("confirm").open`, 5*time.Second)
	b.tabTo(verb)
	if id := eval[string](b, `document.activeElement.id`); id != "confirm-ok" {
		b.t.Fatalf("Tab reached %q in the dialog, not its confirming button", id)
	}
	b.do(chromedp.KeyEvent(kb.Enter))
}

// wantFocus checks the control with the keyboard focus has a name that
// starts with want.
func (b *browser) wantFocus(after, want string) {
	b.t.Helper()
	b.waitFor(`document.activeElement !== document.body`, 5*time.Second)
	if got := b.focused(); !strings.HasPrefix(got, want) {
		b.t.Errorf("after %s the focus is on %q (%s), want %q", after, got, eval[string](b, `document.activeElement.tagName`), want)
	}
}

// wantHeading checks the keyboard focus is on the heading named want.
func (b *browser) wantHeading(after, want string) {
	b.t.Helper()
	b.waitFor(`document.activeElement !== document.body`, 5*time.Second)
	if got, tag := b.focused(), eval[string](b, `document.activeElement.tagName`); got != want || !strings.HasPrefix(tag, "H") {
		b.t.Errorf("after %s the focus is on %q (%s), want the heading %q", after, got, tag, want)
	}
}

// apiCall sends a JSON API request from the page with the session cookie.
func (b *browser) apiCall(method, path, body string) map[string]any {
	b.t.Helper()
	out, err := chromedp.Run(b.ctx, chromedp.Evaluate[map[string]any](`fetch(`+jsString(path)+`, {method: `+jsString(method)+`, credentials: "same-origin",
		headers: {"Content-Type": "application/json", Accept: "application/json"}, body: `+jsString(body)+` || undefined})
		.then(async r => { const j = r.status === 204 ? {} : await r.json(); if (!r.ok) throw new Error(r.status + " " + JSON.stringify(j)); return j; })`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	return out
}

// Every page of the dashboard, at a laptop's and a phone's width, passes
// axe-core's WCAG 2.2 AA rules with nothing of impact moderate or above,
// shows a focus ring of 3:1 on every control, and keeps its tables'
// headers; and every in-place action, done with the keyboard alone, says
// what happened in the page's live region and leaves the focus on the
// same action of the next row, or on the heading when none is left. The
// gateway pages, which need a paired gateway, are checked the same way in
// TestGatewayPairingEndToEnd.
func TestDashboardAccessibility(t *testing.T) {
	axe := axeSource(t)
	w := newWorld(t)
	b := newBrowser(t, w.base)

	step(t, "signed-out pages")
	b.open("/signup")
	b.audit("a11y-signup", axe)
	b.open("/login")
	b.audit("a11y-login", axe)
	b.open("/signin")
	b.waitFor(`document.getElementById("live-alert").textContent.includes("incomplete")`, 5*time.Second)
	b.audit("a11y-signin-error", axe)

	b.open("/signup")
	b.fill("Namespace", "acme")
	b.fill("Passkey name", "Laptop")
	b.press("button", "Sign up")
	b.waitFor(`location.pathname === "/claims"`, 10*time.Second)
	b.keepPasskeys()

	var agents []string
	for range 3 {
		a, _ := identity.New("acme")
		agents = append(agents, fmt.Sprintf(`{"namespace":"acme","service":"weather","public_key":%q,"status":"pending"}`, identity.FormatPublicKey(a.PublicKey)))
	}
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
	}
	// The seed also opens a second session of acme, for End session.
	w.post(t, "/v1/test/seed", `{"namespaces":["acme"],"claims":[`+strings.Join(agents, ",")+`]}`, &seeded)

	step(t, "claims by keyboard")
	b.open("/claims")
	b.waitFor(`document.querySelectorAll("tr[data-status=pending]").length === 3`, 5*time.Second)
	b.audit("a11y-claims-pending", axe)
	label := func(n int) string {
		return eval[string](b, fmt.Sprintf(`document.querySelectorAll("tr[data-status=pending]")[%d].querySelector("button").getAttribute("aria-label").replace(/^Approve /, "")`, n))
	}
	first, second, third := label(0), label(1), label(2)
	b.tabTo("Approve ")
	b.saveShot("a11y-focus-ring", false)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.said("Claim for " + first + " approved.")
	b.wantFocus("Approve", "Approve "+second)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.said("Claim for " + second + " approved.")
	b.wantFocus("a second Approve", "Approve "+third)
	b.do(chromedp.KeyEvent(kb.Tab))
	b.wantFocus("one Tab", "Reject "+third)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.said("Claim for " + third + " rejected.")
	b.wantHeading("the last Reject", "Claims")

	agents = agents[:0]
	for range 2 {
		a, _ := identity.New("acme")
		agents = append(agents, fmt.Sprintf(`{"namespace":"acme","service":"weather","public_key":%q,"status":"pending"}`, identity.FormatPublicKey(a.PublicKey)))
	}
	w.post(t, "/v1/test/seed", `{"claims":[`+strings.Join(agents, ",")+`]}`, &seeded)
	b.open("/claims?status=pending&service=weather")
	b.tabTo("Reject all pending claims of weather")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Reject all")
	b.said("All 2 pending claims of weather rejected.")
	b.wantHeading("Reject all", "Claims")

	b.open("/claims?status=approved")
	b.waitFor(`document.querySelectorAll("tr[data-status=approved]").length === 2`, 5*time.Second)
	b.audit("a11y-claims-approved", axe)
	revoked := eval[string](b, `document.querySelector("tr[data-status=approved] button").getAttribute("aria-label").replace(/^Revoke /, "")`)
	b.tabTo("Revoke ")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Revoke")
	b.said("Claim for " + revoked + " revoked.")
	b.wantFocus("a confirmed Revoke", "Revoke ")
	if got := b.focused(); got == "Revoke "+revoked {
		t.Errorf("after Revoke the focus is on the revoked claim's %q", got)
	}
	other := strings.TrimPrefix(b.focused(), "Revoke ")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Revoke")
	b.said("Claim for " + other + " revoked.")
	b.wantHeading("the last Revoke", "Claims")

	step(t, "API keys and webhooks by keyboard")
	svc := b.apiCall("POST", "/v1/services", `{"name":"Weather API","service_endpoint":"https://weather.example/api"}`)
	id := svc["service"].(map[string]any)["id"].(string)
	b.apiCall("POST", "/v1/services/"+id+"/keys", "")
	for _, url := range []string{w.hook, w.hook + "-2"} {
		b.apiCall("POST", "/v1/services/"+id+"/webhooks", fmt.Sprintf(`{"url":%q,"events":["request.approved"]}`, url))
	}
	b.open("/services")
	b.audit("a11y-services", axe)
	b.open("/services/" + id)
	b.audit("a11y-service", axe)
	b.tabTo("Revoke key ")
	key := strings.TrimPrefix(b.focused(), "Revoke key ")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Revoke key")
	b.said("Key " + key + "… revoked.")
	b.wantFocus("Revoke key", "Revoke key ")
	if got := b.focused(); got == "Revoke key "+key {
		t.Errorf("after Revoke key the focus is on the revoked key's %q", got)
	}
	b.tabTo("Send test event to " + w.hook)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.said("Test event queued; its delivery appears below.")
	b.wantFocus("Send test event", "Send test event to "+w.hook)
	b.tabTo("Delete webhook " + w.hook)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Delete webhook")
	b.said("Webhook to " + w.hook + " deleted.")
	b.wantFocus("Delete webhook", "Delete webhook "+w.hook+"-2")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Delete webhook")
	b.said("Webhook to " + w.hook + "-2 deleted.")
	b.wantHeading("the last Delete webhook", "Webhooks")

	step(t, "sessions by keyboard")
	b.open("/account")
	b.waitFor(`!document.getElementById("sessions").hidden`, 5*time.Second)
	b.audit("a11y-account", axe)
	b.tabTo("End session ")
	started := strings.TrimPrefix(b.focused(), "End session started ")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.said("The session started " + started + " has ended.")
	b.wantHeading("the last End session", "Sessions")

	step(t, "the other pages")
	b.open("/did")
	b.audit("a11y-did", axe)
	b.open("/gateways")
	b.audit("a11y-gateways-empty", axe)
	b.open("/activity")
	b.audit("a11y-activity-empty", axe)
	reportActivity(t, pairedReporter(t, w, b, "acme"), 12)
	b.open("/activity")
	b.audit("a11y-activity", axe)
	b.open("/services/svc_missing")
	b.audit("a11y-error", axe)

	step(t, "an error is said at once")
	b.open("/services")
	b.fill("Name", "Bad endpoint")
	b.fill("Service endpoint", "ftp://nowhere")
	b.tabTo("Create service")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`document.getElementById("live-alert").textContent !== ""`, 5*time.Second)
	if alert, beside := eval[string](b, `document.getElementById("live-alert").textContent`), b.errorText("Create service"); !strings.HasPrefix(beside, alert) {
		t.Errorf("the assertive live region says %q, the error beside Create service %q", alert, beside)
	}
	if got := b.focused(); got != "Create service" {
		t.Errorf("after a failed Create service the focus is on %q", got)
	}
}
