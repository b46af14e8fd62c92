package dashboard_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// A message beside a control survives the re-render of its table when it
// is newer than the data the table was drawn from, and an answer that
// arrives after a re-render replaced its control shows beside the control
// that took its place: a Test pressed just after a Save reloaded the
// connections kept its answer.
func TestFeedbackOutlivesReRender(t *testing.T) {
	chromium(t)
	w := newWorld(t)
	b := newBrowser(t, w.base)
	b.open("/login")
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[map[string]string](`(async () => {
		const m = await import(document.querySelector('script[src$="/app.js"]').src.replace(/app\.js$/, "feedback.js"));
		const row = (id) => {
			const tr = document.createElement('tr');
			tr.dataset.connection = id;
			const td = document.createElement('td');
			td.className = 'act';
			for (const verb of ['Test', 'Discover']) {
				const b = document.createElement('button');
				b.textContent = verb;
				b.setAttribute('aria-label', verb + ' ' + id);
				td.append(b);
			}
			tr.append(td);
			return tr;
		};
		const table = (...ids) => {
			const t = document.createElement('table');
			t.createTBody().append(...ids.map(row));
			return t;
		};
		const said = (host, label) => {
			const b = host.querySelector('[aria-label="' + label + '"]');
			return document.getElementById(b.getAttribute('aria-describedby') ?? '')?.textContent ?? '';
		};
		const host = document.createElement('div');
		document.body.append(host);
		const out = {};

		host.replaceChildren(table('docs', 'mail'));
		m.feedback(host.querySelector('[aria-label="Test mail"]'), 'old answer', 'done');
		const tick = () => new Promise((r) => setTimeout(r, 5));
		await tick();
		const asked = performance.now();
		await tick();
		m.feedback(host.querySelector('[aria-label="Test docs"]'), 'Test failed: 404.', 'err');
		m.replaceKeeping(host, asked, table('mail', 'docs'));
		out.kept = said(host, 'Test docs');
		out.older = said(host, 'Test mail');
		out.messages = String(host.querySelectorAll('p.err, p.done').length);

		const pressed = host.querySelector('[aria-label="Discover docs"]');
		m.replaceKeeping(host, performance.now(), table('docs'));
		m.feedback(pressed, 'Discovered 3 tools.', 'done');
		out.late = said(host, 'Discover docs');
		out.inDocument = String(document.getElementById(host.querySelector('[aria-label="Discover docs"]').getAttribute('aria-describedby'))?.isConnected);
		return out;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kept": "Test failed: 404.", "older": "", "messages": "1", "late": "Discovered 3 tools.", "inDocument": "true"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
