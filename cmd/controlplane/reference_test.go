package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/idnhq/idn/docs"
	"github.com/idnhq/idn/kit/envconf"
)

// TestHelpIsTheReference: what serve -h says of each setting is its row
// in docs/control-plane.md, so the two cannot disagree (as -h once said
// WEBHOOK_FAILURE_THRESHOLD disables a webhook, which it does not).
func TestHelpIsTheReference(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"serve", "-h"}, env(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := map[string]string{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			lines[f[0]] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), f[0]))
		}
	}
	n := 0
	for _, v := range envconf.WithReference(serveVars(), docs.ControlPlane) {
		n++
		if got := lines[v.Name]; !strings.HasPrefix(got, v.Doc) {
			t.Errorf("%s: -h says %q, the reference %q", v.Name, got, v.Doc)
		}
	}
	if got := lines["WEBHOOK_FAILURE_THRESHOLD"]; !strings.HasPrefix(got, "Failed attempts after which a delivery fails for good.") {
		t.Errorf("WEBHOOK_FAILURE_THRESHOLD: -h says %q", got)
	}
	if n < 40 {
		t.Fatalf("only %d variables", n)
	}
}

// TestReferenceListsEverySetting: docs/control-plane.md has a row, with the
// right default, for every variable a command reads, and no row for a
// variable nothing reads.
func TestReferenceListsEverySetting(t *testing.T) {
	ref, err := os.ReadFile("../../docs/control-plane.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var vars []envconf.Var
	var walk func(c *command)
	walk = func(c *command) {
		if c.vars != nil {
			for _, v := range c.vars() {
				if !seen[v.Name] {
					seen[v.Name] = true
					vars = append(vars, v)
				}
			}
		}
		for _, s := range c.sub {
			walk(s)
		}
	}
	walk(root)
	if len(vars) < 40 {
		t.Fatalf("only %d variables recorded", len(vars))
	}
	for _, p := range envconf.CheckReference(vars, ref) {
		t.Error("docs/control-plane.md: " + p)
	}
}
