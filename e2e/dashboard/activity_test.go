package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
)

// pairedReporter pairs a gateway (package pairing, in process) with the
// owner signed in to b, as `gateway pair` does, and returns the reporter
// that sends its decisions, running until the test ends.
func pairedReporter(t *testing.T, w *world, b *browser, ns string) *pairing.Reporter {
	t.Helper()
	p := b.apiCall("POST", "/v1/gateways/pairings", "")
	id, err := identity.New("gw-host")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.GenerateMasterKey()
	dir := t.TempDir()
	vault, err := credvault.New(context.Background(), credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vault.Close() })
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	adm, err := admin.New(admin.Config{Vault: vault, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	client, err := pairing.New(pairing.Config{ControlPlaneURL: w.cpURL, Identity: id, Admin: adm, DataDir: dir,
		MasterKey: key, Name: "activity-laptop"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	paired := make(chan error, 1)
	go func() {
		paired <- client.Run(ctx, &pairing.Pairing{SessionID: p["session_id"].(string), Code: p["pair_code"].(string), Namespace: ns})
	}()
	// Paired now: the reporter needs not read the pairing state first.
	rep, err := pairing.NewReporter(pairing.ReporterConfig{ControlPlaneURL: w.cpURL, Identity: id, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reporting := make(chan struct{})
	t.Cleanup(func() { cancel(); <-paired; <-reporting })
	eventually(t, 10*time.Second, "the gateway to pair", func() bool { _, ok := client.State(); return ok })
	go func() { defer close(reporting); rep.Run(ctx) }()
	return rep
}

// reportActivity has rep report n decisions, one a second apart and
// newest last: every fifth a refusal of stranger-bot, the others
// weather-bot's requests, the last one an MCP tool call; and waits until
// the control plane took them all.
func reportActivity(t *testing.T, rep *pairing.Reporter, n int) {
	t.Helper()
	start := time.Now().Add(-time.Duration(n) * time.Second)
	sent := rep.Sent()
	for i := range n {
		a := pairing.Activity{At: start.Add(time.Duration(i) * time.Second), AgentName: "weather-bot", AgentKey: "ed25519:d2VhdGhlci1ib3Qta2V5LWZvci10ZXN0cy0wMDAwMDA",
			Connection: "weather", Service: "weather", Method: "GET", Route: "/forecast/{id}", Allowed: true, Status: 200,
			Latency: time.Duration(1000+i) * time.Microsecond}
		switch {
		case i == n-1:
			a.MCP, a.Connection, a.Method, a.Route, a.Tool = true, "docs", "tools/call", "", "search"
		case i%5 == 0:
			a.AgentName, a.AgentKey, a.Allowed, a.Reason, a.Status = "stranger-bot", "ed25519:c3RyYW5nZXItYm90LWtleS1mb3ItdGVzdHMtMDAwMDA", false, "AUTH_CLAIM_REQUIRED", 403
		}
		rep.Record(a)
	}
	eventually(t, 15*time.Second, fmt.Sprintf("the control plane to take %d records", n), func() bool { return rep.Sent() >= sent+int64(n) })
}

// TestActivityPage: an owner reads what a paired gateway reported, filters
// it, pages through it and exports it, with the keyboard.
func TestActivityPage(t *testing.T) {
	w := newWorld(t)
	b := newBrowser(t, w.base)
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
	}
	w.post(t, "/v1/test/seed", `{"namespaces":["acme"]}`, &seeded)
	if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: controlplane.SessionCookie,
		Value: seeded.Sessions["acme"], URL: w.base, HTTPOnly: new(true)}); err != nil {
		t.Fatal(err)
	}
	b.open("/activity")
	if got := eval[string](b, `document.querySelector("#activity-region .summary")?.textContent || ""`); !strings.HasPrefix(got, "No activity yet") {
		t.Fatalf("an owner without activity reads %q", got)
	}
	rep := pairedReporter(t, w, b, "acme")
	reportActivity(t, rep, 55)

	step(t, "the newest 50, then the older ones by keyboard")
	b.open("/activity")
	rows := `document.querySelectorAll("tr[data-activity]").length`
	if got := eval[int](b, rows); got != 50 {
		t.Fatalf("the first page shows %d rows, want 50", got)
	}
	first := eval[string](b, `document.querySelector("tr[data-activity]").textContent`)
	for _, want := range []string{"MCP", "tools/call", "search", "allowed", "docs"} {
		if !strings.Contains(first, want) {
			t.Errorf("the newest row %q lacks %q", first, want)
		}
	}
	b.shot("activity")
	b.tabTo("Older decisions")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.search.includes("before=") && document.readyState === "complete"`, 5*time.Second)
	if got := eval[int](b, rows); got != 5 {
		t.Errorf("the second page shows %d rows, want 5", got)
	}

	step(t, "filter the refusals by keyboard, in place")
	b.open("/activity")
	eval[bool](b, `window.idnSamePage = true`)
	b.tabTo("Any decision")
	b.do(chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown))
	b.tabTo("Filter")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.search.includes("decision=deny") && document.readyState === "complete"`, 5*time.Second)
	if !eval[bool](b, `window.idnSamePage === true`) {
		t.Error("filtering reloaded the page")
	}
	if got := b.focused(); got != "Filter" {
		t.Errorf("after filtering the keyboard is on %q, want the Filter button", got)
	}
	denied := eval[[]string](b, `[...document.querySelectorAll("tr[data-activity]")].map(r => r.textContent)`)
	if len(denied) != 11 {
		t.Errorf("%d refusals listed, want 11", len(denied))
	}
	for _, r := range denied {
		if !strings.Contains(r, "denied") || !strings.Contains(r, "AUTH_CLAIM_REQUIRED") || !strings.Contains(r, "stranger-bot") {
			t.Errorf("a row of the refusals reads %q", r)
		}
	}

	step(t, "the exports follow the filters")
	got := awaitJS[map[string]any](b, `(async () => {
		const r = await fetch(document.querySelector("a[href*='format=csv']").href);
		return {type: r.headers.get("Content-Type"), lines: (await r.text()).trim().split("\n").length};
	})()`)
	if got["type"] != "text/csv; charset=utf-8" || got["lines"] != float64(12) {
		t.Errorf("the CSV export of the refusals: %v, want text/csv with a header and 11 rows", got)
	}
	got = awaitJS[map[string]any](b, `(async () => {
		const r = await fetch(document.querySelector("a[href*='format=jsonl']").href);
		const lines = (await r.text()).trim().split("\n").map(l => JSON.parse(l));
		return {n: lines.length, deny: lines.every(l => l.decision === "deny")};
	})()`)
	if got["n"] != float64(11) || got["deny"] != true {
		t.Errorf("the JSON Lines export of the refusals: %v", got)
	}

	step(t, "filter by a part of the agent's name and a connection")
	b.open("/activity")
	b.fill("Agent", "Weather")
	b.fill("Connection", "weather")
	b.press("button", "Filter")
	b.waitFor(`location.search.includes("agent=Weather") && document.readyState === "complete"`, 5*time.Second)
	if got := eval[int](b, rows); got != 43 { // 55 less 11 refusals less the MCP call
		t.Errorf("weather-bot's requests through weather: %d rows, want 43", got)
	}
}

// awaitJS is eval of an expression whose value is a promise.
func awaitJS[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}
