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
	out := t.TempDir()
	output := runConformance(t, out, "server", "--suite", "all", "--url", url, "--output-dir", out)
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	scenarios := map[string]Scenario{}
	for _, e := range entries {
		if m := resultDir.FindStringSubmatch(e.Name()); m != nil {
			scenarios[m[1]] = readChecks(t, filepath.Join(out, e.Name(), "checks.json"))
		}
	}
	if len(scenarios) == 0 {
		t.Fatalf("the conformance runner wrote no results:\n%s", output)
	}
	return scenarios, output
}

// ConformanceClient runs the client scenario of the official MCP
// conformance runner against the client command (the runner appends the
// URL of its server to it, and names the scenario and its context in
// MCP_CONFORMANCE_SCENARIO and MCP_CONFORMANCE_CONTEXT). It returns the
// scenario's outcome, with the runner's output for the log.
func ConformanceClient(t testing.TB, scenario, command string) (Scenario, []byte) {
	t.Helper()
	out := t.TempDir()
	output := runConformance(t, out, "client", "--scenario", scenario, "--command", command, "--output-dir", out)
	var found []string
	_ = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "checks.json" {
			found = append(found, path)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("the conformance runner wrote %d results for %s:\n%s", len(found), scenario, output)
	}
	return readChecks(t, found[0]), output
}

// runConformance runs the conformance runner with args in dir and
// returns its output.
func runConformance(t testing.TB, dir string, args ...string) []byte {
	t.Helper()
	modules, node := Modules(t, "the MCP conformance runner")
	_, file, _, _ := runtime.Caller(0)
	runner := filepath.Join(modules, "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(runner); err != nil {
		// Packages installed before the runner was pinned.
		missing(t, "the MCP conformance runner")
	}
	cmd := exec.Command(node, append([]string{"--import", filepath.Join(filepath.Dir(file), "conformance", "globsync.mjs"), runner}, args...)...)
	cmd.Dir = dir
	// A failed scenario makes the runner exit 1: the checks say which.
	output, _ := cmd.CombinedOutput()
	return output
}

// readChecks reads a scenario's checks.json.
func readChecks(t testing.TB, path string) Scenario {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var checks []struct {
		Status       string `json:"status"`
		ErrorMessage string `json:"errorMessage"`
	}
	if err := json.Unmarshal(raw, &checks); err != nil {
		t.Fatalf("%s: %v", path, err)
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
	return s
}
