package dashboard_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestQuickstartOpensTheDashboard runs the quickstart as a user would and
// follows the one link it prints: the browser lands in the dashboard,
// signed in as the demo namespace, on the claim the demo approved. The
// page invites the owner to add a passkey; once the session is gone,
// `quickstart link` opens the dashboard again, and the passkey added
// there ends the invitation.
func TestQuickstartOpensTheDashboard(t *testing.T) {
	chromium(t)
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, "./quickstart")
	build.Dir = "../../examples" // its module's folder: builds with or without go.work
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the quickstart: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "--dir", dir, "--gateway-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGINT); _ = cmd.Wait() })

	var link string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if l := strings.TrimSpace(lines.Text()); strings.HasPrefix(l, "http://localhost:") && strings.Contains(l, "/signin") {
			link = l
			break
		}
	}
	if link == "" {
		t.Fatalf("the quickstart printed no dashboard link (%v)", lines.Err())
	}
	go func() { // keep the pipe drained while the quickstart runs
		for lines.Scan() {
		}
	}()

	b := newBrowser(t, link[:strings.Index(link, "/signin")])
	b.do(chromedp.Navigate(link))
	b.waitFor(`location.pathname + location.search === "/claims?status=approved" && document.querySelector("tr[data-status=approved]")`, 10*time.Second)
	if ns := eval[string](b, `document.body.dataset.namespace`); ns != "quickstart-agent" {
		t.Fatalf("signed in as %q", ns)
	}
	if row := eval[string](b, `document.querySelector("tr[data-status=approved]").innerText`); !strings.Contains(row, "demo-weather") {
		t.Fatalf("approved row = %q", row)
	}
	b.shot("quickstart-claims")

	step(t, "the owner is invited to add a passkey")
	if got := eval[string](b, `document.getElementById("passkey-invite")?.innerText ?? ""`); !strings.Contains(got, "no passkey yet") {
		t.Fatalf("the invitation to add a passkey reads %q", got)
	}

	step(t, "with the session gone, quickstart link opens the dashboard again")
	if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	b.open("/claims")
	if page := eval[string](b, `document.body.dataset.page`); page != "login" {
		t.Fatalf("without a session /claims shows the %s page", page)
	}
	fresh, err := exec.CommandContext(ctx, bin, "link", "--dir", dir).Output()
	if err != nil {
		t.Fatalf("quickstart link: %v", err)
	}
	again, _, _ := strings.Cut(string(fresh), "\n")
	b.do(chromedp.Navigate(again))
	b.waitFor(`location.pathname === "/claims" && document.body.dataset.namespace === "quickstart-agent"`, 10*time.Second)

	step(t, "the invitation leads to adding a passkey, and then is gone")
	b.tabTo("Add a passkey")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`location.pathname === "/account" && document.readyState === "complete"`, 5*time.Second)
	b.fill("Passkey name", "Laptop")
	b.press("button", "Add passkey")
	b.waitFor(`document.querySelectorAll("#passkeys-region tbody tr").length === 1 || document.querySelector("p.err")`, 15*time.Second)
	if msg := eval[string](b, `document.querySelector("p.err")?.textContent ?? ""`); msg != "" {
		t.Fatalf("adding the first passkey failed: %s", msg)
	}
	b.open("/claims")
	if eval[bool](b, `document.getElementById("passkey-invite") !== null`) {
		t.Error("the owner is still invited to add a passkey after adding one")
	}
}
