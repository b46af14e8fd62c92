package main

import (
	"os"
	"testing"

	"github.com/idnhq/idn/kit/envconf"
)

// TestReferenceListsEverySetting: docs/gateway.md has a row, with the
// right default, for every variable a command reads, and no row for a
// variable nothing reads.
func TestReferenceListsEverySetting(t *testing.T) {
	t.Parallel()
	ref, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var vars []envconf.Var
	for _, c := range commands {
		list := storeVars()
		if c.vars != nil {
			list = c.vars()
		}
		for _, v := range list {
			if !seen[v.Name] {
				seen[v.Name] = true
				vars = append(vars, v)
			}
		}
	}
	if len(vars) < 40 {
		t.Fatalf("only %d variables recorded", len(vars))
	}
	for _, p := range envconf.CheckReference(vars, ref) {
		t.Error("docs/gateway.md: " + p)
	}
}
