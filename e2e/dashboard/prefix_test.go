package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idnhq/idn/controlplane"
)

// TestDashboardUnderPrefix drives the dashboard of a control plane that an
// application serves under /idn/ (Config.BasePath): a sign-in link lands on
// /idn/claims, a service made from the services page goes through the API
// under the prefix, and logging out returns to /idn/login.
func TestDashboardUnderPrefix(t *testing.T) {
	chromium(t)
	ln := freePort(t)
	origin := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	st, err := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: filepath.Join(t.TempDir(), "cp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp, err := controlplane.New(controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("j"), 32), BasePath: "/idn",
		AllowedOrigins: []string{origin}, InsecureLocalhostCookie: true, SigninLinks: true,
		Auth: controlplane.AuthConfig{Origins: []string{origin}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/idn/", cp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the application") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); _ = cp.Close() })
	ctx := context.Background()
	if _, err := cp.Provision(ctx, "acme", controlplane.ServiceSpec{}); err != nil {
		t.Fatal(err)
	}
	link, _, err := cp.SigninLink(ctx, "acme", "/signin?next=/services")
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, origin)
	b.do(chromedp.Navigate(origin + link))
	b.waitFor(`location.pathname === "/idn/services" && document.body.dataset.namespace === "acme"`, 10*time.Second)
	b.fill("Name", "Weather API")
	b.fill("Service endpoint", "https://weather.example/api")
	b.press("button", "Create service")
	b.waitFor(`!document.getElementById("service-secret").hidden`, 5*time.Second)
	if key := eval[string](b, `document.getElementById("service-secret-value").value`); !strings.HasPrefix(key, "idn_sk_") {
		t.Fatalf("API key shown = %q", key)
	}
	if href := eval[string](b, `document.querySelector("nav a[href$='/claims']").getAttribute("href")`); href != "/idn/claims" {
		t.Fatalf("the claims link is %q", href)
	}
	b.shot("prefix-services")
	b.press("button", "Log out")
	b.waitFor(`location.pathname === "/idn/login"`, 5*time.Second)
}
