package main

import (
	"os"
	"testing"

	"github.com/idnhq/idn/internal/envconf"
)

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
