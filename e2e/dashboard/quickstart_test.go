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

	"github.com/chromedp/chromedp"
)

// TestQuickstartOpensTheDashboard runs the quickstart as a user would and
// follows the one link it prints: the browser lands in the dashboard,
// signed in as the demo namespace, on the claim the demo approved.
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
	cmd := exec.CommandContext(ctx, bin, "--dir", t.TempDir(), "--gateway-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0")
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
}
