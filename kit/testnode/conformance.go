package testnode

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// Scenario is what the MCP conformance runner found in one scenario: its
// checks by status, and the first failure's message.
type Scenario struct {
	Successes, Warnings, Failures int
	Failure                       string
}

// Passed reports whether no check of the scenario failed, as the runner's
// summary marks it.
func (s Scenario) Passed() bool { return s.Failures == 0 }

// resultDir is the folder the runner writes a server scenario's checks to.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[0-9-]+Z$`)

// ConformanceServer runs every server scenario of the official MCP
// conformance runner (npm @modelcontextprotocol/conformance, suite "all")
// against the MCP server at url and returns each scenario's outcome by
// name, with the runner's output for the log. On Node before 22 the
// runner needs fs.globSync, which conformance/globsync.mjs supplies.
func ConformanceServer(t testing.TB, url string) (map[string]Scenario, []byte) {
	t.Helper()
	modules, node := Modules(t, "the MCP conformance runner")
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "conformance")
	runner := filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(runner); err != nil {
		// Packages installed before the runner was pinned.
		missing(t, "the MCP conformance runner")
	}
	out := t.TempDir()
	cmd := exec.Command(node, "--import", filepath.Join(dir, "globsync.mjs"), runner,
		"server", "--suite", "all", "--url", url, "--output-dir", out)
	cmd.Dir = out
	// A failed scenario makes the runner exit 1: the checks say which.
	output, _ := cmd.CombinedOutput()
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	scenarios := map[string]Scenario{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var s Scenario
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				s.Successes++
			case "WARNING":
				s.Warnings++
			case "FAILURE":
				if s.Failures++; s.Failure == "" {
					s.Failure = c.ErrorMessage
				}
			}
		}
		scenarios[m[1]] = s
	}
	if len(scenarios) == 0 {
		t.Fatalf("the conformance runner wrote no results:\n%s", output)
	}
	return scenarios, output
}
