package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// After a real passkey login, and after a one-time sign-in link, the
// dashboard goes to the page ?next= names only when Chromium resolves it
// on the dashboard's own origin: the forms of "/\t/evil" a browser reads
// as "//evil" land on /claims, and nothing reaches the other origin.
func TestSignInNextStaysOnTheDashboard(t *testing.T) {
	w := newWorld(t)
	b := newBrowser(t, w.base)
	var visits atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		visits.Add(1)
		rw.Write([]byte("<!doctype html><title>evil</title>"))
	}))
	defer evil.Close()
	host := strings.TrimPrefix(evil.URL, "http://")

	b.open("/signup")
	b.fill("Namespace", "acme")
	b.fill("Passkey name", "Laptop")
	b.press("button", "Sign up")
	b.waitFor(`location.pathname === "/claims"`, 10*time.Second)
	b.keepPasskeys()

	outer := t
	// The raw query value of ?next=, and the path it must land on.
	for name, tc := range map[string]struct{ next, want string }{
		"tab":                            {"/%09/" + host, "/claims"},
		"newline":                        {"/%0A/" + host, "/claims"},
		"carriage return":                {"/%0D/" + host, "/claims"},
		"tab and newline":                {"/%09%0A/" + host, "/claims"},
		"backslash":                      {"/%5C" + host, "/claims"},
		"two backslashes":                {"%5C%5C" + host, "/claims"},
		"tab then backslash":             {"/%09%5C" + host, "/claims"},
		"leading space":                  {"%20//" + host, "/claims"},
		"protocol-relative":              {"//" + host, "/claims"},
		"encoded protocol-relative":      {"%2F%2F" + host, "/claims"},
		"absolute URL":                   {"http://" + host + "/", "/claims"},
		"double-encoded tab stays local": {"/%2509/" + host, "/%09/" + host},
		"a page of the dashboard":        {"%2Fservices", "/services"},
	} {
		t.Run(name, func(t *testing.T) {
			b.t = t
			defer func() { b.t = outer }()
			landed := func(from string) {
				t.Helper()
				b.waitFor(`document.readyState === "complete" && (location.origin !== `+jsString(w.base)+` || location.pathname !== `+jsString(from)+`)`, 10*time.Second)
				if origin, path := eval[string](b, "location.origin"), b.path(); origin != w.base || path != tc.want {
					t.Errorf("after %s with next=%s: at %s%s, want %s%s", from, tc.next, origin, path, w.base, tc.want)
				}
			}
			signOut := func() {
				t.Helper()
				if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
					t.Fatal(err)
				}
			}

			signOut()
			b.open("/login?next=" + tc.next)
			b.fill("Namespace", "acme")
			b.press("button", "Log in")
			landed("/login")

			var link struct {
				URL string `json:"url"`
			}
			signOut()
			w.post(t, "/v1/test/signin-links", `{"namespace":"operator"}`, &link)
			token := link.URL[strings.Index(link.URL, "#"):]
			b.do(chromedp.Navigate(w.base + "/signin?next=" + tc.next + token))
			landed("/signin")
		})
	}
	if n := visits.Load(); n != 0 {
		t.Errorf("the other origin was visited %d times", n)
	}
}
