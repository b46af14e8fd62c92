package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idnhq/idn/controlplane"
)

// lineBreaks is a script that gives the characters of the text of the
// element sel after which a line ends, as the browser laid them out.
const lineBreaks = `((sel) => {
  const walk = document.createTreeWalker(document.querySelector(sel), NodeFilter.SHOW_TEXT), r = document.createRange();
  const out = [];
  let text = '', top = null;
  for (let node; (node = walk.nextNode());) {
    for (let i = 0; i < node.length; i++) {
      r.setStart(node, i); r.setEnd(node, i + 1);
      const t = r.getClientRects()[0]?.top;
      if (t !== undefined && top !== null && t > top + 1) out.push(text);
      if (t !== undefined) top = t;
      text += node.textContent[i];
    }
  }
  return out;
})`

// TestLongValuesLayout looks at what long values do at 1280 and 390 px:
// a service endpoint wraps, if it must, only after its scheme or a slash
// of its path, never inside its host; the pairing command shows whole, not cut at the
// edge of a one-line box.
func TestLongValuesLayout(t *testing.T) {
	chromium(t)
	ln := freePort(t)
	origin := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	st, err := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(t.TempDir(), "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp, err := controlplane.New(controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("j"), 32),
		AllowedOrigins: []string{origin}, InsecureLocalhostCookie: true, SigninLinks: true,
		Auth: controlplane.AuthConfig{Origins: []string{origin}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: cp, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); _ = cp.Close() })
	ctx := context.Background()
	const endpoint = "https://weather-forecasts.example.com/api/v2/forecast"
	if _, err := cp.Provision(ctx, "acme", controlplane.ServiceSpec{Slug: "weather", Name: "Weather", Endpoint: endpoint}); err != nil {
		t.Fatal(err)
	}
	link, _, err := cp.SigninLink(ctx, "acme", "/signin?next=/services")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, origin)
	b.do(chromedp.Navigate(origin + link))
	b.waitFor(`location.pathname === "/services" && document.body.dataset.namespace === "acme"`, 10*time.Second)

	for _, width := range []int64{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			b.t = t
			b.viewport(width, 844)
			b.open("/services")
			breaks := eval[[]string](b, lineBreaks+`("td[data-label=Endpoint]")`)
			if width == 1280 && len(breaks) > 0 {
				t.Errorf("the endpoint wraps after %q at 1280 px, with room to spare", breaks)
			}
			for _, at := range breaks {
				if at != "https://" && (at[len(at)-1] != '/' || len(at) < len("https://weather-forecasts.example.com/")) {
					t.Errorf("the endpoint wraps inside its address, after %q", at)
				}
			}
			b.shot(fmt.Sprintf("services-%d", width))

			b.open("/gateways")
			b.press("button", "Pair gateway")
			b.waitFor(`document.getElementById("pairing-command").value !== ""`, 5*time.Second)
			if cut := eval[bool](b, `(() => { const c = document.getElementById("pairing-command");
				return c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1; })()`); cut {
				t.Errorf("the pairing command is cut: %q", eval[string](b, `document.getElementById("pairing-command").value`))
			}
			if over := eval[bool](b, `document.documentElement.scrollWidth > innerWidth`); over {
				t.Errorf("the gateways page scrolls sideways at %d px", width)
			}
			b.shot(fmt.Sprintf("gateways-pairing-%d", width))
		})
	}
}
