package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestPairCommandLine: the mistakes of a pair command line are usage
// errors (exit 2), and --status and --stop need no master key and no
// running process.
func TestPairCommandLine(t *testing.T) {
	c := newCLIRunner(t)
	for _, args := range [][]string{
		{"pair", "--status", "--stop"},
		{"pair", "--daemon", "--status"},
		{"pair", "--session-id", "gps_1"},
		{"pair", "--pair-code", "ABCDEFGH"},
	} {
		if r := c.run(args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	r := c.run("pair")
	if r.code == 0 || !strings.Contains(r.stderr, "IDN_REGISTRY_URL is required") {
		t.Errorf("pair without a registry: exit %d, %q", r.code, r.stderr)
	}
	c.env["IDN_REGISTRY_URL"] = "http://127.0.0.1:1"
	c.env["GATEWAY_ADMIN_ACCESS_MODE"] = "loopback"
	if r := c.run("pair"); r.code != 2 || !strings.Contains(r.stderr, "not paired yet") {
		t.Errorf("pair before any pairing: exit %d, %q", r.code, r.stderr)
	}
	delete(c.env, "GATEWAY_MASTER_KEY")
	if r := c.run("pair", "--status"); r.code != 0 || !strings.Contains(r.stdout, "hpke key fingerprint: ") ||
		!strings.Contains(r.stdout, "paired: no") || !strings.Contains(r.stdout, "running: no") {
		t.Errorf("pair --status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// gateway serve keeps a paired gateway's link under the same lock.
	unlock, ok, err := lockLink(c.env["GATEWAY_DATA_DIR"])
	if err != nil || !ok {
		t.Fatalf("take the link's lock as serve does: %v %v", ok, err)
	}
	if r := c.run("pair", "--status"); !strings.Contains(r.stdout, fmt.Sprintf("running: yes, in gateway serve (pid %d)", os.Getpid())) {
		t.Errorf("pair --status while serve keeps the link: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	unlock()
	if r := c.run("pair", "--status"); !strings.Contains(r.stdout, "running: no") {
		t.Errorf("pair --status once serve let go: %s", r.stdout)
	}
	if r := c.run("pair", "--stop"); r.code != 0 || !strings.Contains(r.stdout, "no pair process") {
		t.Errorf("pair --stop with nothing running: exit %d %q", r.code, r.stdout)
	}
	if r := c.run("pair", "-h"); r.code != 0 || !strings.Contains(r.stdout, "--session-id") || !strings.Contains(r.stdout, "IDN_REGISTRY_URL") {
		t.Errorf("pair -h: %q", r.stdout)
	}
	c.assertNoSecrets(cliMasterKey)
}
