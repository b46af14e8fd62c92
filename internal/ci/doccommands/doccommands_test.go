package doccommands_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/internal/ci/doccommands"
)

// notRunnable are the commands the docs show that this test cannot run
// offline, each with the reason. A command of the repository's binaries
// listed here still has its subcommands and flags checked against their
// help. An entry no document shows any more fails the test, so the list
// follows the docs.
var notRunnable = map[string]string{
	"go run ./examples/quickstart":                             "serves until Ctrl-C and resets its data folder",
	"go run ./examples/quickstart link":                        "needs a running quickstart",
	"bash .ci/run":                                             "the whole CI run, which installs packages and runs this test",
	"pip install ./sdk/python             # with cryptography": "installs into the caller's Python",
	"pip install './sdk/python[httpx]'    # and httpx; or [requests], or [httpx,requests]": "installs into the caller's Python",
	"python3 -m venv --system-site-packages .venv":                                         "makes a virtual environment in the working folder",
	".venv/bin/pip install --no-build-isolation --no-index ./sdk/python":                   "needs the virtual environment of the line before",
	"cd sdk/typescript && npm ci && npm run build && npm pack   # → idnhq-idn-0.2.0.tgz":   "fetches packages from the npm registry",
	"cd /your/project && npm install /path/to/idn/sdk/typescript/idnhq-idn-0.2.0.tgz":      "names the reader's own project",
	`python -m idn init acme-bot --name "Invoice bot"   # [--force] [--json]`:              "writes an identity into the caller's IDN_HOME (the SDK's tests run it)",
	`npx @idnhq/idn init acme-bot --name "Invoice bot"   # [--force] [--json]`:             "needs the package installed in the reader's project (the SDK's tests run it)",
	`gateway add --id graph --base-url https://graph.microsoft.com/v1.0 --auth-mode oauth2_client_credentials --oauth-token-url "https://login.microsoftonline.com/$TENANT/oauth2/v2.0/token" --oauth-client-id "$APP_ID" --oauth-scope https://graph.microsoft.com/.default --auth-secret-key client_secret --secret client_secret=-`: "needs the reader's Microsoft app registration",
	`gateway add --id drive --base-url https://www.googleapis.com/drive/v3 --auth-mode oauth2_authorization_code --oauth-issuer https://accounts.google.com --oauth-client-id "$CLIENT_ID" --oauth-scope https://www.googleapis.com/auth/drive.readonly --auth-secret-key client_secret --secret client_secret=-`:                      "needs the reader's Google OAuth client",
	"gateway connect --id drive": "waits for the reader to sign in to Google in a browser",
	"gateway add --id linear --protocol mcp --base-url https://mcp.linear.app/mcp --auth-mode oauth2_authorization_code": "adds a connection to the reader's own gateway store",
	"gateway connect --id linear --listen 127.0.0.1:8976":                                                                "waits for the reader to sign in to Linear in a browser",
}

// binaries are the repository's programs, by the name a command calls
// them and the package go run names.
var binaries = map[string]string{
	"gateway":      "./cmd/gateway",
	"controlplane": "./cmd/controlplane",
	"idn":          "./cmd/idn",
	"quickstart":   "./examples/quickstart",
}

// helpArgs are the arguments that only print help or a version.
var helpArgs = []string{"-h", "-help", "--help", "-version", "--version"}

// program reports which of the repository's binaries words runs, and
// with which arguments.
func program(words []string) (name string, args []string, ok bool) {
	if _, ok := binaries[words[0]]; ok {
		return words[0], words[1:], true
	}
	if len(words) >= 3 && words[0] == "go" && words[1] == "run" {
		for name, pkg := range binaries {
			if words[2] == pkg {
				return name, words[3:], true
			}
		}
	}
	return "", nil, false
}

// TestDocumentedCommands runs every command README.md and docs/*.md show
// that is safe offline, checks the subcommands and flags of the others
// that call the repository's binaries, and fails on any other command
// not listed in notRunnable.
func TestDocumentedCommands(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds, bare, err := doccommands.Find(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bare {
		t.Errorf("%s:%d: a code block names no language; name it (sh for commands, text for anything else) so commands cannot hide", b.File, b.Line)
	}
	if len(cmds) == 0 {
		t.Fatal("no command found in the docs: the search is broken")
	}
	bins := buildBinaries(t, root)
	shown := map[string]bool{}
	for _, c := range cmds {
		shown[c.Text] = true
		where := c.File + ":" + strconv.Itoa(c.Line) + ": " + c.Text
		_, listed := notRunnable[c.Text]
		safe := true
		for _, words := range c.Segments {
			name, args, ours := program(words)
			if !ours || len(args) == 0 || slices.ContainsFunc(args, func(a string) bool { return !slices.Contains(helpArgs, a) }) {
				safe = false
			}
			if ours {
				checkAgainstHelp(t, where, bins[name], args)
			}
		}
		switch {
		case safe && listed:
			t.Errorf("%s: listed as not runnable, but it is safe to run here", where)
		case safe:
			for _, words := range c.Segments {
				name, args, _ := program(words)
				if out, err := runBinary(bins[name], args...); err != nil {
					t.Errorf("%s: %v\n%s", where, err, out)
				}
			}
		case !listed:
			t.Errorf("%s: neither safe to run offline (help or version of the repository's binaries) nor listed in notRunnable with the reason", where)
		}
	}
	for text := range notRunnable {
		if !shown[text] {
			t.Errorf("notRunnable lists %q, which no document shows any more", text)
		}
	}
}

// checkAgainstHelp runs bin with the leading subcommands of args and -h,
// and checks every flag args names appears in that help: a renamed
// subcommand or flag fails the docs.
func checkAgainstHelp(t *testing.T, where, bin string, args []string) {
	t.Helper()
	var sub []string
	help, err := runBinary(bin, "-h")
	if err != nil {
		t.Errorf("%s: %s -h: %v\n%s", where, filepath.Base(bin), err, help)
		return
	}
	for _, a := range args {
		// The plain words before the first flag or argument are
		// subcommands, each named in its parent's help.
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(a) {
			break
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(a) + `\b`).MatchString(help) {
			t.Errorf("%s: %s has no subcommand %q (its help:\n%s)", where, strings.Join(append([]string{filepath.Base(bin)}, sub...), " "), a, help)
			return
		}
		sub = append(sub, a)
		if help, err = runBinary(bin, append(slices.Clone(sub), "-h")...); err != nil {
			t.Errorf("%s: %s %s -h: %v\n%s", where, filepath.Base(bin), strings.Join(sub, " "), err, help)
			return
		}
	}
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "-")
		if !ok || name == "" || slices.Contains(helpArgs, a) {
			continue
		}
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
		if !regexp.MustCompile(`(^|\s)--?` + regexp.QuoteMeta(name) + `\b`).MatchString(help) {
			t.Errorf("%s: %s has no flag -%s (its help:\n%s)", where, strings.Join(append([]string{filepath.Base(bin)}, sub...), " "), name, help)
		}
	}
}

// buildBinaries builds the repository's programs once, into a temporary
// folder, by the workspace at root.
func buildBinaries(t *testing.T, root string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir}
	for _, pkg := range binaries {
		args = append(args, pkg)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out := map[string]string{}
	for name := range binaries {
		out[name] = filepath.Join(dir, name)
	}
	return out
}

// runBinary runs bin offline-safe: a private HOME, no other environment,
// a bounded time. Its output is stdout and stderr together.
func runBinary(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	home, err := os.MkdirTemp("", "doccommands-home-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = home
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSplit: the command lines are read as a shell reads them, as far as
// the docs need.
func TestSplit(t *testing.T) {
	for line, want := range map[string]string{
		`go run ./examples/quickstart`:                                    `[[go run ./examples/quickstart]]`,
		`IDN_HOME=/tmp/a go run ./cmd/idn curl 'http://x/y?a=1&b=2'`:      `[[go run ./cmd/idn curl http://x/y?a=1&b=2]]`,
		`cd sdk && npm ci && npm pack   # → x.tgz`:                        `[[cd sdk] [npm ci] [npm pack]]`,
		`curl -s "$URL/metrics" | grep '^idn_gateway'`:                    `[[curl -s $URL/metrics] [grep ^idn_gateway]]`,
		`pip install './sdk/python[httpx]'    # and httpx; or [requests]`: `[[pip install ./sdk/python[httpx]]]`,
		`echo a\ b; true || false`:                                        `[[echo a b] [true] [false]]`,
	} {
		got, err := doccommands.Split(line)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("Split(%q) = %v, %v; want %s", line, got, err, want)
		}
	}
	if _, err := doccommands.Split(`echo 'open`); err == nil {
		t.Error("an unclosed quote passed")
	}
}
