package main

import (
	"strings"
	"testing"
)

// gateway connect refuses what cannot be connected before it listens.
func TestConnectRefusals(t *testing.T) {
	c := newCLIRunner(t)
	if r := c.run("add", "--id", "static", "--base-url", "https://api.example.com", "--auth-mode", "bearer", "--secret", "token=static-secret-value"); r.code != 0 {
		t.Fatalf("add: %s", r.stderr)
	}
	if r := c.run("add", "--id", "drive", "--base-url", "https://www.googleapis.com", "--auth-mode", "oauth2_authorization_code",
		"--oauth-issuer", "https://accounts.google.com", "--oauth-client-id", "client", "--oauth-per-subject"); r.code != 0 {
		t.Fatalf("add: %s", r.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a connection with a static secret", []string{"connect", "static"}, "only \"oauth2_authorization_code\" connections"},
		{"an account per subject without one", []string{"connect", "drive"}, "name it with --subject"},
		{"a redirect listener off loopback", []string{"connect", "drive", "--subject", "alice", "--listen", "0.0.0.0:8976"}, "must be a loopback address"},
		{"no such connection", []string{"connect", "--id", "nope"}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.run(tc.args...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("%v: code %d, stderr %q", tc.args, r.code, r.stderr)
			}
		})
	}
	c.assertNoSecrets("static-secret-value")
}
