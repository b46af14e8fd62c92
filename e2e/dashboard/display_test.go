package dashboard_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idnhq/idn/identity/display"
)

// The dashboard's display.js writes out the same characters as the
// servers' Go rule, so a connection name a gateway sends shows in the
// browser as a control-plane name shows in a page.
func TestShownInChromiumMatchesGo(t *testing.T) {
	chromium(t)
	w := newWorld(t)
	b := newBrowser(t, w.base)
	b.open("/login")
	in := []string{
		"plain name", "Zürich ботик 東京", "bot \u2764\uFE0F", "Cafe\u0301", "a\uFFFDb", "VS17 x\U000E0100",
		"invoice\u202Egpj.exe", "a\u202Ab\u202Bc\u202Cd\u202De", "a\u2066b\u2067c\u2068d\u2069", "a\u200Eb\u200Fc\u061Cd",
		"a\u200Bb\u200Cc\u200Dd", "a\u2060b\u2061c\u2064d", "\uFEFFbom", "soft\u00ADhyphen", "tag\U000E0001\U000E0041\U000E007F",
		"tab\tnew\nline\r", "c1\u0085\u009F", "del\x7f", "sep\u2028\u2029", "nbsp\u00A0em\u2003ideo\u3000narrow\u202F",
		"filler\u3164\u115F\u1160\uFFA0", "cgj\u034F", "khmer\u17B4\u17B5", "pua\uE000\U000F0000", "nonchar\uFDD0\uFFFE\U0001FFFF",
		"spec\uFFF0", "lang\U000E0000\U000E0080\U000E01F0",
	}
	raw, _ := json.Marshal(in)
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`(async () => {
		const m = await import(document.querySelector('script[src$="/app.js"]').src.replace(/app\.js$/, "display.js"));
		return `+string(raw)+`.map(m.shown);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range in {
		if want := display.Shown(s); got[i] != want {
			t.Errorf("shown(%q) = %q in Chromium, %q in Go", s, got[i], want)
		}
	}
}
