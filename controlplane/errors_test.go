package controlplane

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestStoreReturnsNoHTTPErrors keeps the store free of the HTTP layer: its
// files do not import the envelope package, so they can only return
// domain errors, which errorTable maps.
func TestStoreReturnsNoHTTPErrors(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*store*.go")
	if err != nil {
		t.Fatal(err)
	}
	parts, err := filepath.Glob("*/store*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, parts...)
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "github.com/idnhq/idn/apierror" || path == "net/http" {
				t.Errorf("%s imports %s: the store returns domain errors, never HTTP answers", name, path)
			}
		}
	}
}
