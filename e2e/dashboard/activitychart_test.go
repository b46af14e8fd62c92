package dashboard_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/pairing"
)

// TestActivityChart: above the Activity table, a chart of the calls over
// time by decision and denial reason, which follows the filters, reads
// at a phone's width, and gives a screen reader the same counts as a
// table.
func TestActivityChart(t *testing.T) {
	w := newWorld(t)
	b := newBrowser(t, w.base)
	axe := axeSource(t)
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
	}
	w.post(t, "/v1/test/seed", `{"namespaces":["acme"]}`, &seeded)
	if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: controlplane.SessionCookie,
		Value: seeded.Sessions["acme"], URL: w.base, HTTPOnly: new(true)}); err != nil {
		t.Fatal(err)
	}
	b.open("/activity")
	rep := pairedReporter(t, w, b, "acme")
	// 120 decisions over the last 40 minutes, busier lately: 96 allowed,
	// 24 denied for four reasons.
	reasons := []string{"AUTH_CLAIM_REQUIRED", "AUTH_CLAIM_REQUIRED", "AUTH_SIGNATURE_INVALID", "RATE_LIMITED"}
	sent := rep.Sent()
	for i := range 120 {
		a := pairing.Activity{At: time.Now().Add(-time.Duration((120-i)*(120-i)) * 40 * time.Minute / (120 * 120)),
			AgentName: "weather-bot", AgentKey: "ed25519:d2VhdGhlci1ib3Qta2V5LWZvci10ZXN0cy0wMDAwMDA",
			Connection: "weather", Service: "weather", Method: "GET", Route: "/forecast/{id}", Allowed: true, Status: 200,
			Latency: time.Millisecond}
		if i%5 == 0 {
			a.Allowed, a.Reason, a.Status = false, reasons[(i/5)%len(reasons)], 403
		}
		rep.Record(a)
	}
	eventually(t, 15*time.Second, "the control plane to take 120 records", func() bool { return rep.Sent() >= sent+120 })

	step(t, "the last hour's chart, its legend and its bars")
	b.open("/activity?range=1h")
	legend := eval[[]string](b, `[...document.querySelectorAll("#activity-chart .legend li")].map(li => li.textContent)`)
	if want := []string{"Allowed (96)", "Denied: AUTH_CLAIM_REQUIRED (12)", "Denied: AUTH_SIGNATURE_INVALID (6)", "Denied: RATE_LIMITED (6)"}; fmt.Sprint(legend) != fmt.Sprint(want) {
		t.Errorf("the legend reads %q, want %q", legend, want)
	}
	bars := eval[int](b, `document.querySelectorAll("#activity-chart g[data-bar]").length`)
	if bars < 10 {
		t.Errorf("%d bars drawn for calls over 40 minutes in 2-minute steps", bars)
	}
	// The tallest bar fills the plot; the colours are the legend's.
	tallest := eval[float64](b, `Math.max(...[...document.querySelectorAll("#activity-chart g[data-bar]")].map(g => g.getBoundingClientRect().height))
		/ document.querySelector("#activity-chart svg").getBoundingClientRect().height`)
	if tallest < 0.97 || tallest > 1.01 {
		t.Errorf("the tallest bar is %.2f of the plot's height, want all of it", tallest)
	}
	if got := eval[string](b, `getComputedStyle(document.querySelector("#activity-chart rect.series0")).fill`); got != "rgb(6, 118, 71)" {
		t.Errorf("allowed calls are drawn in %s", got)
	}
	if got := eval[string](b, `getComputedStyle(document.querySelector("#activity-chart .legend .series0")).backgroundColor`); got != "rgb(6, 118, 71)" {
		t.Errorf("the legend's allowed swatch is %s", got)
	}
	if eval[int](b, `document.querySelector("#activity-chart").compareDocumentPosition(document.querySelector("table.cards"))`)&4 == 0 {
		t.Error("the chart is not above the table")
	}
	b.shot("activity-chart")

	step(t, "a screen reader reads the summary and the table, not the drawing")
	if len(b.named("heading", "Calls over time")) != 1 {
		t.Error("the chart has no heading in the accessibility tree")
	}
	if eval[string](b, `document.querySelector("#activity-chart .plot").getAttribute("aria-hidden")`) != "true" {
		t.Error("the drawing is not hidden from the accessibility tree")
	}
	b.tabTo("Show these counts as a table")
	b.do(chromedp.KeyEvent(kb.Enter))
	if len(b.named("table", "Calls per step of 2 minutes")) != 1 {
		t.Fatal("the opened table is not in the accessibility tree with its caption")
	}
	rows := eval[[]string](b, `[...document.querySelectorAll("#activity-chart tbody tr")].map(r => r.textContent)`)
	total := eval[int](b, `[...document.querySelectorAll("#activity-chart tbody tr td:last-child")].reduce((s, td) => s + Number(td.textContent), 0)`)
	if len(rows) != bars || total != 120 {
		t.Errorf("the table has %d rows totalling %d, want %d (one per bar) totalling 120", len(rows), total, bars)
	}
	b.audit("a11y-activity-chart", axe)

	step(t, "at a phone's width the chart fits and its labels read")
	b.viewport(390, 844)
	b.waitFor(`document.readyState === "complete"`, 5*time.Second)
	fit := eval[map[string]float64](b, `(() => {
		const plot = document.querySelector("#activity-chart svg").getBoundingClientRect();
		const labels = [...document.querySelectorAll("#activity-chart .legend li, #activity-chart .xaxis span")];
		return {page: document.documentElement.scrollWidth, plot: plot.width, right: plot.right,
			smallest: Math.min(...labels.map(l => parseFloat(getComputedStyle(l).fontSize))),
			clipped: labels.filter(l => l.getBoundingClientRect().right > innerWidth).length};
	})()`)
	if fit["page"] > 390 || fit["right"] > 390 || fit["plot"] < 300 || fit["smallest"] < 12 || fit["clipped"] > 0 {
		t.Errorf("at 390 px: %v", fit)
	}
	b.saveShot("activity-chart-phone", false)
	b.viewport(1280, 900)

	step(t, "the chart follows the filters")
	b.tabTo("Any decision")
	b.do(chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown))
	b.tabTo("Filter")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.search.includes("decision=deny") && document.readyState === "complete"`, 5*time.Second)
	summary := eval[string](b, `document.querySelector("#activity-chart .summary").textContent`)
	if !strings.Contains(summary, "24 calls") || !strings.Contains(summary, "0 allowed, 24 denied") {
		t.Errorf("the refusals' chart says %q", summary)
	}
	if got := eval[int](b, `document.querySelectorAll("#activity-chart rect.series0").length`); got != 0 {
		t.Errorf("the refusals' chart draws %d allowed segments", got)
	}
	b.open("/activity?connection=nowhere")
	if eval[bool](b, `document.querySelector("#activity-chart") !== null`) {
		t.Error("an empty selection draws a chart")
	}
}
